// The three decisions, each one guest call over all the records: encode into
// the arena, call, validate, decode. Nothing here allocates unless the
// decision faults.

package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
)

// fault describes why an instance could not decide; the zero value means it
// did.
type fault struct {
	kind   FaultKind
	reason string
	broken bool // the instance must be discarded
}

// callFault turns a call error into a fault.
func (in *instance) callFault(err error) fault {
	if errors.Is(err, errRefused) {
		return fault{kind: FaultRefused, reason: err.Error()}
	}
	kind, reason := in.describe(err)
	return fault{kind: kind, reason: reason, broken: true}
}

// timed runs the slot's export and records the fuel it burnt and its
// latency, read from the
// monotonic clock alone (time.Now reads the wall clock too, which costs
// as much again here).
func (in *instance) timed() error {
	err := in.call(in.decide)
	in.plugin.stats.observe(in.took()) // the call alone: the clock is read once more
	in.plugin.stats.fuel.max(uint64(max(in.burnt, 0)))
	return err
}

// took returns how long the last call took, from when it started to now.
func (in *instance) took() time.Duration {
	return time.Since(in.plugin.rt.epoch) - time.Duration(in.lastStart)
}

// pick makes a fairness decision, writing into picks.
func (in *instance) pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) (int, fault) {
	slots := min(uint32(len(picks)), ctx.Slots)
	n := uint32(len(cands))
	need := abi.FairnessBytes(n, slots)
	var namesAt uint32
	names := in.plugin.names() && ctx.Names != nil
	if names {
		total := 0
		for i := range cands {
			total += len(ctx.Names.AgentID(i)) + len(ctx.Names.LaneName(i))
		}
		need, namesAt = abi.NamesBytes(n, slots, total)
	}
	if err := in.ensureArena(need); err != nil {
		return 0, in.callFault(err)
	}
	b := in.view(need)
	abi.PutHeader(b, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.CandidateSize, Count: n, NamesOffset: namesAt})
	abi.PutCandidates(b[abi.HeaderSize:], cands)
	if names {
		putNames(b, namesAt, n, ctx.Names)
	}
	s := in.stack
	s[0], s[1], s[2], s[3] = uint64(ctx.NowMs), uint64(ctx.AgingMs), uint64(slots), uint64(ctx.Flags)
	in.reason = ""
	if err := in.timed(); err != nil {
		return 0, in.callFault(err)
	}
	k := int32(s[0])
	if k <= abi.HoldBase && k >= abi.HoldBase-abi.MaxHoldHintMs && in.plugin.version >= 2 {
		return policy.Hold(int64(abi.HoldBase - k)), fault{}
	}
	if k < 0 {
		return 0, fault{kind: FaultRefused, reason: in.reasonOr("fairness_pick returned an error")}
	}
	if uint32(k) > slots {
		return 0, fault{kind: FaultInvalid, reason: fmt.Sprintf("fairness_pick returned %d picks for %d slots", k, slots)}
	}
	out := in.view(need)[abi.OutputOffset(n, abi.CandidateSize):]
	for i := range int(k) {
		if c := binary.LittleEndian.Uint32(out[4*i:]); c >= n {
			return 0, fault{kind: FaultInvalid, reason: fmt.Sprintf("fairness_pick picked candidate %d of %d", c, n)}
		}
	}
	for i := range int(k) {
		picks[i] = binary.LittleEndian.Uint32(out[4*i:])
	}
	return int(k), fault{}
}

// rank makes a selection decision, writing into ranks.
func (in *instance) rank(nowMs int64, tasks []policy.Task, ranks []int64) fault {
	n := uint32(len(tasks))
	need := abi.SelectionBytes(n)
	if err := in.ensureArena(need); err != nil {
		return in.callFault(err)
	}
	b := in.view(need)
	abi.PutHeader(b, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.TaskSize, Count: n})
	abi.PutTasks(b[abi.HeaderSize:], tasks)
	in.stack[0] = uint64(nowMs)
	in.reason = ""
	if err := in.timed(); err != nil {
		return in.callFault(err)
	}
	k := int32(in.stack[0])
	if k < 0 {
		return fault{kind: FaultRefused, reason: in.reasonOr("selection_rank returned an error")}
	}
	if uint32(k) != n {
		return fault{kind: FaultInvalid, reason: fmt.Sprintf("selection_rank ranked %d of %d tasks", k, n)}
	}
	out := in.view(need)[abi.OutputOffset(n, abi.TaskSize):]
	for i := range ranks[:n] {
		ranks[i] = int64(binary.LittleEndian.Uint64(out[8*i:]))
	}
	return fault{}
}

// decideRetry makes a retry decision.
func (in *instance) decideRetry(f *policy.Failure) (policy.Decision, fault) {
	if err := in.ensureArena(abi.RetryBytes); err != nil {
		return policy.Decision{}, in.callFault(err)
	}
	b := in.view(abi.RetryBytes)
	abi.PutHeader(b, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.FailureSize, Count: 1})
	abi.PutFailure(b[abi.HeaderSize:], f)
	in.reason = ""
	if err := in.timed(); err != nil {
		return policy.Decision{}, in.callFault(err)
	}
	d, ok := abi.UnpackDecision(int64(in.stack[0]))
	if !ok {
		return d, fault{kind: FaultRefused, reason: in.reasonOr("retry_decide returned an error")}
	}
	if !policy.Valid(d) {
		return d, fault{kind: FaultInvalid, reason: fmt.Sprintf("retry_decide answered action %d with delay %d ms", d.Action, d.DelayMs)}
	}
	return d, fault{}
}

// outcome says how a plugin decision ended.
type outcome uint8

const (
	decided     outcome = iota // the plugin answered validly
	unavailable                // no instance (disabled, closed or rebuilding): fall back
	faulted                    // a fault was recorded: fall back
)

// finish returns the instance (or discards a broken one) and accounts for
// the decision.
func (p *Plugin) finish(in *instance, f fault) outcome {
	var took time.Duration
	if f.kind != 0 {
		took = in.took() // the call that faulted, and what followed it
	}
	if f.broken {
		p.discard(in)
	} else {
		p.release(in)
	}
	if f.kind == 0 {
		p.succeeded()
		return decided
	}
	p.fault(f.kind, f.reason, took)
	return faulted
}

func (p *Plugin) pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) (int, outcome) {
	in := p.begin()
	if in == nil {
		return 0, unavailable
	}
	n, f := in.pick(ctx, cands, picks)
	return n, p.finish(in, f)
}

func (p *Plugin) rank(nowMs int64, tasks []policy.Task, ranks []int64) outcome {
	in := p.begin()
	if in == nil {
		return unavailable
	}
	return p.finish(in, in.rank(nowMs, tasks, ranks))
}

func (p *Plugin) decide(f *policy.Failure) (policy.Decision, outcome) {
	in := p.begin()
	if in == nil {
		return policy.Decision{}, unavailable
	}
	d, ft := in.decideRetry(f)
	return d, p.finish(in, ft)
}

// putNames writes the names table (ABI v2) at off: one entry per candidate,
// then the names themselves.
func putNames(b []byte, off, n uint32, names policy.Names) {
	le := binary.LittleEndian
	at := off + n*abi.NameEntrySize
	for i := range int(n) {
		e := b[off+uint32(i)*abi.NameEntrySize:]
		agent, lane := names.AgentID(i), names.LaneName(i)
		le.PutUint64(e[0:], policy.Key(agent))
		le.PutUint64(e[8:], policy.Key(lane))
		le.PutUint32(e[16:], at)
		le.PutUint32(e[20:], uint32(len(agent)))
		at += uint32(copy(b[at:], agent))
		le.PutUint32(e[24:], at)
		le.PutUint32(e[28:], uint32(len(lane)))
		at += uint32(copy(b[at:], lane))
	}
}
