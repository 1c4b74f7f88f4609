package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// TestCopyPayloadsMatchTheColumnArrays holds the COPY payloads that
// rowsLocked writes as it goes to what copyRows wrote from the column
// arrays before (refCopy, below, is that code over the arrays the pipeline
// path still builds), and the events each task's status row carries to a
// plain scan of the batch, over random batches: new and stored tasks, a task
// twice, events of tasks the batch does not carry and of none, optional
// fields empty and not, first events in the tasks' rows or not.
func TestCopyPayloadsMatchTheColumnArrays(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(21, 22))
	for round := range 400 {
		b, maxSeq, foldable := randomBatch(rng)
		viaCopy := &Store{copyMin: 0, maxTaskSeq: maxSeq}
		viaCols := &Store{copyMin: 1 << 30, maxTaskSeq: maxSeq}
		inRow := round%2 == 0
		viaCopy.firstInRow.Store(inRow)
		viaCols.firstInRow.Store(inRow)
		rc, err := viaCopy.rowsLocked(b)
		require.NoError(t, err)
		require.True(t, rc.copy)
		ra, err := viaCols.rowsLocked(b)
		require.NoError(t, err)
		require.False(t, ra.copy)
		msg := fmt.Sprintf("round %d", round)

		inRows := map[int64]*engine.Event{} // by task seq: its first event, in its row
		if inRow {
			for i := range b.Events {
				if e := &b.Events[i]; foldable[e.Seq] {
					inRows[int64(e.Seq)] = e
				}
			}
		}
		tasks, status, events := refCopy(b, ra, inRows)
		rc.cp.tasks.end()
		rc.cp.status.end()
		rc.cp.events.end()
		require.Equal(t, len(ra.newTasks.seq), rc.cp.newTasks, msg)
		require.True(t, bytes.Equal(tasks, rc.cp.tasks.b), msg+": tasks")
		require.True(t, bytes.Equal(status, rc.cp.status.b), msg+": task_status")
		require.True(t, bytes.Equal(events, rc.cp.events.b), msg+": events")
		require.Equal(t, ra.maxTask, rc.maxTask, msg)
		require.Equal(t, ra.oldStatus, rc.oldStatus, msg)

		// Every event is written once: as a row of events, or as the
		// first event in its new task's row. The pipelined path keeps
		// them all as rows.
		require.Len(t, ra.events.seq, len(b.Events), msg)
		require.Equal(t, len(b.Events)-len(inRows), rc.cp.newEvents, msg)

		// The events of each status row, and those of tasks not carried.
		want := map[string]string{}
		for i := range b.Events {
			if id := b.Events[i].TaskID; id != "" {
				want[id] = strings.TrimSuffix(strings.TrimPrefix(want[id], "{"), "}")
				if want[id] != "" {
					want[id] += ","
				}
				want[id] = "{" + want[id] + strconv.FormatUint(b.Events[i].Seq, 10) + "}"
			}
		}
		got := map[string]string{}
		bySeq := map[int64]string{}
		for _, tk := range b.Tasks {
			bySeq[int64(tk.Seq)] = tk.ID
		}
		for _, st := range []*statusRows{&ra.newStatus, &ra.oldStatus} {
			for i, seq := range st.seq {
				if st.evs[i] != "" {
					got[bySeq[seq]] = st.evs[i]
				}
			}
		}
		for i, id := range ra.extraEvents.id {
			got[string(id)] = ra.extraEvents.evs[i]
		}
		require.Equal(t, want, got, msg)
		for _, r := range []*commitRows{ra, rc} {
			extra := map[string]string{}
			for i, id := range r.extraEvents.id {
				extra[string(id)] = r.extraEvents.evs[i]
			}
			require.Len(t, extra, len(r.extraEvents.id), msg)
		}
		require.ElementsMatch(t, ra.extraEvents.id, rc.extraEvents.id, msg)
		require.ElementsMatch(t, ra.extraEvents.evs, rc.extraEvents.evs, msg)

		// addsOnly's view of the new tasks' batches.
		var batches []string
		for _, id := range ra.newTasks.batch {
			if id != nil && (len(batches) == 0 || batches[len(batches)-1] != string(id)) {
				batches = append(batches, string(id))
			}
		}
		require.Equal(t, batches, rc.newBatches, msg)
		rc.cp.release()
	}
}

// randomBatch returns a batch, the highest stored seq, and the seqs of the
// events that are new tasks' first events in a shape their rows hold.
func randomBatch(rng *rand.Rand) (*engine.Batch, uint64, map[uint64]bool) {
	maxSeq := uint64(1000)
	b := &engine.Batch{}
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	seq := maxSeq + 1
	var ids []string
	for i := range rng.IntN(40) + 1 {
		var tk *engine.Task
		if len(ids) > 0 && rng.IntN(8) == 0 {
			// The same task again, later in the batch.
			again := ids[rng.IntN(len(ids))]
			for _, prev := range b.Tasks {
				if prev.ID == again {
					cp := *prev
					tk = &cp
					break
				}
			}
			tk.State = engine.State(rng.IntN(8))
		} else {
			spec := &engine.TaskSpec{
				AgentID: pick("a", "agent-7", ""), Lane: pick("main", "slow"),
				SessionKey: pick("", "s1"), TabID: pick("", "tab-1"), BatchID: pick("", "b1", "b2"),
				ParentID: pick("", "p"), IdempotencyKey: pick("", "k"),
				SubmittedAt: time.Unix(1700000000, int64(i)),
			}
			if rng.IntN(2) == 0 {
				spec.Labels = map[string]string{pick("bench", "x"): pick("1", "", "long value")}
			}
			if rng.IntN(3) > 0 {
				spec.Action = &engine.Action{Kind: "click", Selector: "css:#go"}
				if rng.IntN(2) == 0 {
					spec.Action.Params = json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)
				}
			} else {
				spec.Instruction = "do it"
			}
			tk = &engine.Task{ID: fmt.Sprintf("t%03d", i), Spec: spec, State: engine.State(rng.IntN(8))}
			if rng.IntN(4) == 0 {
				tk.Seq = uint64(i) + 1 // stored already
			} else {
				tk.Seq = seq
				seq++
			}
			ids = append(ids, tk.ID)
		}
		if rng.IntN(3) == 0 {
			tk.Result = json.RawMessage(`{"ok":true}`)
		}
		if rng.IntN(3) == 0 {
			tk.EndedAt = time.Unix(1700000100, 5)
		}
		b.Tasks = append(b.Tasks, tk)
	}
	for i := range rng.IntN(80) {
		e := engine.Event{Seq: seq + uint64(i), At: time.Unix(1700000000, int64(i)), Type: engine.EventType(rng.IntN(5)),
			AgentID: pick("", "a"), Lane: pick("", "main"), SessionKey: pick("", "s"), BatchID: pick("", "b1"),
			From: engine.State(rng.IntN(8)), To: engine.State(rng.IntN(8)), Attempt: rng.IntN(3),
			Reason: pick("", "why"), Webhook: rng.IntN(2) == 0}
		switch rng.IntN(6) {
		case 0: // no task
		case 1:
			e.TaskID = fmt.Sprintf("elsewhere-%d", rng.IntN(4))
		default:
			if len(ids) > 0 {
				e.TaskID = ids[rng.IntN(len(ids))]
			}
		}
		b.Events = append(b.Events, e)
	}
	// Most new tasks' first events, ahead of the others (a task's first
	// event has its seq), some in a shape the task's row does not hold.
	var firsts []engine.Event
	foldable := map[uint64]bool{}
	for _, tk := range b.Tasks {
		if tk.Seq <= maxSeq || rng.IntN(4) == 0 || slices.ContainsFunc(firsts, func(e engine.Event) bool { return e.TaskID == tk.ID }) {
			continue
		}
		e := engine.Event{Seq: tk.Seq, At: time.Unix(1700000000, int64(tk.Seq)), Type: engine.EventState, TaskID: tk.ID,
			AgentID: tk.Spec.AgentID, Lane: tk.Spec.Lane, SessionKey: tk.Spec.Session(), BatchID: tk.Spec.BatchID,
			To: engine.State(rng.IntN(8)), Reason: pick("", "admitted"), Webhook: rng.IntN(2) == 0}
		switch rng.IntN(8) {
		case 0:
			e.SessionKey += "-other"
		case 1:
			e.Attempt = 1
		case 2:
			e.Type = engine.EventReleased
		default:
			foldable[e.Seq] = true
		}
		firsts = append(firsts, e)
	}
	b.Events = append(firsts, b.Events...)
	return b, maxSeq, foldable
}

// refCopy is copyRows as it was: the three payloads written from the column
// arrays of a commit built without COPY, with the first events of inRows
// (by task seq) in the tasks' rows instead of the events'.
func refCopy(b *engine.Batch, r *commitRows, inRows map[int64]*engine.Event) (tasks, status, events []byte) {
	labels := map[int64][][]byte{}
	for _, tk := range b.Tasks {
		labels[int64(tk.Seq)] = labelElems(tk.Spec.Labels)
	}
	var cb copyBuf
	if nt := &r.newTasks; len(nt.seq) > 0 {
		cb.start()
		for i := range nt.seq {
			cb.row(15)
			cb.int8(nt.seq[i])
			cb.bytea(nt.id[i])
			cb.bytea(nt.agent[i])
			cb.bytea(nt.lane[i])
			cb.bytea(nt.session[i])
			cb.bytea(nt.batch[i])
			cb.bytea(nt.parent[i])
			cb.bytea(nt.idem[i])
			refByteaArray(&cb, labels[nt.seq[i]])
			cb.bytea(nt.specs[i])
			cb.bytea(nt.params[i])
			if e := inRows[nt.seq[i]]; e != nil {
				cb.int8(e.At.UnixNano())
				cb.int2(int16(e.To))
				cb.bytea(bytesOrNil(e.Reason))
				cb.bool(e.Webhook)
			} else {
				cb.null()
				cb.null()
				cb.null()
				cb.null()
			}
		}
		cb.end()
		tasks = slices.Clone(cb.b)
		st := &r.newStatus
		cb.start()
		for i := range st.seq {
			cb.row(6)
			cb.int8(st.seq[i])
			cb.int2(st.state[i])
			cb.int8OrNull(st.ended[i])
			cb.bytea(st.status[i])
			cb.bytea(st.result[i])
			cb.int8Array(parseSeqs(st.evs[i]))
		}
		cb.end()
		status = slices.Clone(cb.b)
	} else {
		cb.start()
		cb.end()
		tasks = slices.Clone(cb.b)
		status = tasks
	}
	cb.start()
	if ev := &r.events; len(ev.seq) > 0 {
		for i := range ev.seq {
			if inRows[ev.seq[i]] != nil {
				continue
			}
			cb.row(13)
			cb.int8(ev.seq[i])
			cb.int8(ev.at[i])
			cb.int2(ev.typ[i])
			cb.bytea(ev.task[i])
			cb.bytea(ev.agent[i])
			cb.bytea(ev.lane[i])
			cb.bytea(ev.session[i])
			cb.bytea(ev.batch[i])
			cb.int2(ev.from[i])
			cb.int2(ev.to[i])
			cb.int4(ev.attempt[i])
			cb.bytea(ev.reason[i])
			cb.bool(ev.webhook[i])
		}
	}
	cb.end()
	return tasks, status, slices.Clone(cb.b)
}

// refByteaArray is the byteaArray copyRows wrote labels with.
func refByteaArray(c *copyBuf, v [][]byte) {
	if v == nil {
		c.null()
		return
	}
	at := c.arrayHeader(oidBytea, len(v))
	for _, x := range v {
		c.bytea(x)
	}
	c.arrayEnd(at)
}

func parseSeqs(lit string) []uint64 {
	lit = strings.Trim(lit, "{}")
	if lit == "" {
		return nil
	}
	var out []uint64
	for _, f := range strings.Split(lit, ",") {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			panic(err)
		}
		out = append(out, n)
	}
	return out
}
