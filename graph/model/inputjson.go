// A SubmitTasksInput read straight from a request's JSON.
//
// A submitTasks variable went from the body to a map[string]any tree
// (graph/server/jsonbody.go), through gqlparser's variable check (or the
// server's varCheck, which vouches for what gqlparser would return
// unchanged) and then through SubmitTasksInput.UnmarshalGQLContext: per
// item of a batch, four maps, their keys' and values' boxes, a walk of
// the check, and the copy into the Go types (ADR 0005, finding 17).
// DecodeSubmitTasksJSON reads the variable's JSON text into the Go types
// in one pass, for the inputs it is sure of, and gives exactly what that
// path gives:
//
//   - every object holds only fields the schema defines, each once, none
//     null, every required field present (gqlparser accepts it and
//     returns it unchanged: nothing to check or coerce);
//   - strings without escapes or control characters, valid UTF-8 (what
//     the body decoder reads as they are); String and ID fields are
//     strings, Int and Float fields numbers that gqlparser's check and
//     gqlgen's UnmarshalInt / UnmarshalFloat take, enum fields one of the
//     schema's names exactly, Time fields what graphql.UnmarshalTime takes;
//   - an action's params is compact JSON in the form UnmarshalJSON writes
//     (object keys sorted and unique, printable-ASCII strings without
//     escapes), which is then the params' value as it is.
//
// Anything else — a null, an escape, white space inside params, an
// unknown or repeated field, a value of another type — is "not sure":
// the caller reads the variable as before, so that every error (its
// message and path) is the one the generic path gives. A batch's strings
// are copied into chunks of up to textChunk bytes, its params into one
// buffer, and its items into room from a pool (batchRoom), given back by
// SubmitTasksJSON.Release.

package model

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/jsonnum"
	"github.com/switchyard/switchyard/internal/poison"
)

// SubmitTasksJSON is a SubmitTasksInput that DecodeSubmitTasksJSON read.
// Given as a variable's value, SubmitTasksInput.UnmarshalGQLContext takes
// it as it is; nothing else must see it (the server hands it past
// gqlparser's check, as it does the variables its own check vouches for).
// Its items live in room taken from a pool: Release gives it back.
type SubmitTasksJSON struct {
	in   SubmitTasksInput
	room *batchRoom // nil for a batch too large to pool; &releasedRoom once released
}

// releasedRoom is the room of every released input: a sentinel (room
// nothing is read into), so that SubmitTasksJSON stays in the size class
// it had without a flag of its own.
var releasedRoom batchRoom

// Release gives the room the input's items were read into back for the
// next batch. Call it exactly once, when nothing reads the input any
// more: in the server, once the request's response is written (the POST
// transport, after run). From then on the input and every pointer taken
// from it belong to the next batch — its item list, the items, their keys
// and the strings' and numbers' fields they point to (a payload's
// SubmitTaskResult.Key among them), the tasks' labels, the resolver
// arguments gqlgen holds (graphql.FieldContext.Args) — so anything that
// keeps or reads them later (an asynchronous log or audit sink, a
// deferred or streamed response, a forwarder that encodes after the
// request ended) must copy what it needs first. The strings' bytes, the
// actions' params and the dependency lists are not in the room: a string
// value copied out (as the engine copies each spec) stays valid.
//
// In a test binary (internal/poison) the room is not given back: it is
// overwritten with poison (strings read poison.Text, numbers poison.Int)
// and left to the collector, so that a read after Release sees the
// poison in whatever a test checks; a second Release panics. A batch too
// large to pool is poisoned too. Outside tests a second call does nothing.
func (v *SubmitTasksJSON) Release() {
	r := v.room
	if r == &releasedRoom {
		if poison.On() {
			panic("model: SubmitTasksJSON released twice")
		}
		return
	}
	if poison.On() {
		v.poison()
		return
	}
	v.room, v.in = &releasedRoom, SubmitTasksInput{}
	if r != nil {
		putBatchRoom(r)
	}
}

// poison overwrites the input and its room with poison (Release under
// tests). A batch without room (too large to pool) has its items poisoned
// where they are.
func (v *SubmitTasksJSON) poison() {
	if v.room != nil {
		putBatchRoom(v.room)
	} else {
		for _, it := range v.in.Items {
			if it != nil {
				poison.Fill(it)
			}
		}
	}
	v.room = &releasedRoom
	poison.Fill(&v.in)
}

// batchRoom is where a batch's items are read: their slots, the list of
// pointers to them, and their labels' structs and pointer lists, in
// chunks. A batch read typed allocated all of this afresh (about 370
// bytes an item with one label, the largest allocation a request made
// once the engine items were pooled, ADR 0005, findings 23 and 24); it is
// garbage once the response is written, and every byte allocated brings
// the collector's next cycle nearer, each marking the whole queue.
type batchRoom struct {
	slots    []batchSlot
	items    []*BatchItemInput
	labels   []LabelInput  // the chunk labels are taken from
	lptrs    []*LabelInput // the chunk label lists are taken from
	fix      []strFix      // the places of the batch's strings (inputReader.fix)
	poisoned bool          // given back under tests (internal/poison)
}

var batchRooms sync.Pool

// maxPooledSlots bounds the batches whose room is kept (as the resolver's
// maxPooledItems bounds its engine items); maxPooledLabels bounds a
// label chunk that is kept.
const (
	maxPooledSlots  = 1000
	maxPooledLabels = 4096
)

// getBatchRoom returns room for n items, their slots zero, or nil for a
// batch larger than any kept (or empty: its list is not nil either).
func getBatchRoom(n int) *batchRoom {
	if n == 0 || n > maxPooledSlots {
		return nil
	}
	r, _ := batchRooms.Get().(*batchRoom)
	if r == nil {
		r = &batchRoom{}
	}
	if cap(r.slots) < n {
		r.slots = make([]batchSlot, n)
		r.items = make([]*BatchItemInput, n)
	}
	r.slots, r.items = r.slots[:n], r.items[:n]
	return r
}

// putBatchRoom zeroes r, so that room waiting in the pool holds on to
// nothing of the batch's, and keeps it for the next batch. Under tests
// (internal/poison) it overwrites r with poison instead and keeps it out
// of the pool; room given back twice panics.
func putBatchRoom(r *batchRoom) {
	if poison.On() {
		poisonBatchRoom(r)
		return
	}
	clear(r.slots[:cap(r.slots)])
	clear(r.items[:cap(r.items)])
	if cap(r.labels) > maxPooledLabels {
		r.labels, r.lptrs = nil, nil
	}
	clear(r.labels[:cap(r.labels)])
	clear(r.lptrs[:cap(r.lptrs)])
	clear(r.fix[:cap(r.fix)])
	r.slots, r.items, r.labels, r.lptrs, r.fix = r.slots[:0], r.items[:0], r.labels[:0], r.lptrs[:0], r.fix[:0]
	batchRooms.Put(r)
}

// poisonBatchRoom overwrites the whole of r, to its capacity, with
// poison: the slots and labels where they are, and the lists' pointers
// with pointers to fresh poisoned values.
func poisonBatchRoom(r *batchRoom) {
	if r.poisoned {
		panic("model: a batch's room was given back twice")
	}
	r.poisoned = true
	fillAll(r.slots[:cap(r.slots)])
	fillAll(r.items[:cap(r.items)])
	fillAll(r.labels[:cap(r.labels)])
	fillAll(r.lptrs[:cap(r.lptrs)])
	fillAll(r.fix[:cap(r.fix)])
}

// fillAll poisons every element of list.
func fillAll[T any](list []T) {
	for i := range list {
		poison.Fill(&list[i])
	}
}

// labelRoom returns n zero labels and a list of n pointers for them, from
// r's chunks when they have room (a new chunk otherwise: what was taken
// from the old one stays where it is).
func (r *batchRoom) labelRoom(n int) ([]LabelInput, []*LabelInput) {
	if r == nil || n == 0 {
		return make([]LabelInput, n), make([]*LabelInput, n)
	}
	if cap(r.labels)-len(r.labels) < n {
		r.labels = make([]LabelInput, 0, max(n, 2*cap(r.labels), 64))
	}
	if cap(r.lptrs)-len(r.lptrs) < n {
		r.lptrs = make([]*LabelInput, 0, max(n, 2*cap(r.lptrs), 64))
	}
	at, pat := len(r.labels), len(r.lptrs)
	r.labels, r.lptrs = r.labels[:at+n], r.lptrs[:pat+n]
	return r.labels[at : at+n : at+n], r.lptrs[pat : pat+n : pat+n]
}

// SubmitTaskJSON is a SubmitTaskInput (a submitTask's input) that
// DecodeSubmitTaskJSON read; like SubmitTasksJSON, only
// SubmitTaskInput.UnmarshalGQLContext takes it.
type SubmitTaskJSON struct {
	in SubmitTaskInput
	p  taskValues
}

// DecodeSubmitTaskJSON reads the SubmitTaskInput at the start of b (after
// optional white space), as DecodeSubmitTasksJSON reads a batch's task:
// it returns the input and the offset just after it, or ok false when it
// is not sure to read it as the generic path does.
func DecodeSubmitTaskJSON(b []byte) (v *SubmitTaskJSON, end int, ok bool) {
	d := inputReader{b: b}
	d.fix = d.fixBuf[:0]
	out := &SubmitTaskJSON{}
	if d.next() != '{' || !d.task(&out.in, &out.p) {
		return nil, 0, false
	}
	d.copyStrings()
	d.copyParams()
	return out, d.i, true
}

// maxParamsDepth is the deepest params object or list read here.
const maxParamsDepth = 32

// DecodeSubmitTasksJSON reads the SubmitTasksInput at the start of b
// (after optional white space), returning it and the offset just after
// it, or ok false when it is not sure to read it as the generic path does.
//
// The input's items are read into room from a pool. The caller owns it
// until it calls v.Release, exactly once, after the last read of the
// input or of anything taken from it (see Release for what that covers):
// a transport releases once the request's response is written, and
// anything that reads the input later — asynchronously, or after the
// response — must copy what it needs before. A caller that never
// releases leaves the room to the collector: nothing is corrupted, the
// next batch allocates afresh. The strings and params are copied out of b,
// which the caller may reuse once this returns.
func DecodeSubmitTasksJSON(b []byte) (v *SubmitTasksJSON, end int, ok bool) {
	d := inputReader{b: b}
	d.fix = d.fixBuf[:0]
	out := &SubmitTasksJSON{}
	if !d.tasks(&out.in) {
		if d.room != nil {
			putBatchRoom(d.room)
		}
		return nil, 0, false
	}
	out.room = d.room
	return out, d.i, true
}

// inputReader reads the JSON of a SubmitTasksInput; its methods return
// false for anything they do not take.
type inputReader struct {
	b []byte
	i int
	// fix holds the string fields of the item being read, as offsets into
	// b, until their bytes are copied into one string for all of them.
	fix    []strFix
	fixBuf [8]strFix // fix's first room
	// params holds the batch's action parameters, as offsets into b, until
	// they are copied into one buffer for all of them.
	params []paramsFix
	// room is where the batch's items are read (nil for a single task's
	// input, or a batch too large to pool).
	room *batchRoom
}

type strFix struct {
	dst        *string
	start, end int
}

type paramsFix struct {
	dst        *json.RawMessage
	start, end int
}

func (d *inputReader) next() byte {
	for d.i < len(d.b) {
		switch c := d.b[d.i]; c {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return c
		}
	}
	return 0
}

// fields reads an object, calling field for each key (its raw bytes,
// the reader at its value). seen guards against a repeated field: field
// returns the bit of the field it read (0 for none: refused).
func (d *inputReader) fields(field func(key []byte) uint32) (seen uint32, ok bool) {
	if d.next() != '{' {
		return 0, false
	}
	d.i++
	if d.next() == '}' {
		d.i++
		return 0, true
	}
	for {
		if d.next() != '"' {
			return 0, false
		}
		start := d.i + 1
		j := start
		for j < len(d.b) && d.b[j] != '"' && d.b[j] != '\\' {
			j++
		}
		if j >= len(d.b) || d.b[j] != '"' {
			return 0, false
		}
		key := d.b[start:j]
		d.i = j + 1
		if d.next() != ':' {
			return 0, false
		}
		d.i++
		if d.next() == 'n' {
			return 0, false // null: the generic path
		}
		bit := field(key)
		if bit == 0 || seen&bit != 0 {
			return 0, false
		}
		seen |= bit
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return seen, true
		default:
			return 0, false
		}
	}
}

// str reads a string without escapes or control characters, of valid
// UTF-8, as offsets into b.
func (d *inputReader) str() (start, end int, ok bool) {
	if d.next() != '"' {
		return 0, 0, false
	}
	start = d.i + 1
	ascii := true
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(d.b[start:j]) {
				return 0, 0, false
			}
			d.i = j + 1
			return start, j, true
		case c == '\\' || c < 0x20:
			return 0, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return 0, 0, false
}

// strField reads a string into *dst (when the item is done).
func (d *inputReader) strField(dst *string) bool {
	start, end, ok := d.str()
	if ok {
		d.fix = append(d.fix, strFix{dst, start, end})
	}
	return ok
}

// number reads a number of JSON's grammar, returning its text.
func (d *inputReader) number() ([]byte, bool) {
	d.next()
	end, ok := jsonnum.End(d.b, d.i)
	if !ok {
		return nil, false
	}
	start := d.i
	d.i = end
	return d.b[start:end], true
}

// intField reads an Int as gqlparser's check and graphql.UnmarshalInt
// take it.
func (d *inputReader) intField() (int, bool) {
	lit, ok := d.number()
	if !ok {
		return 0, false
	}
	if _, err := strconv.ParseInt(string(lit), 10, 64); err != nil {
		return 0, false
	}
	n, err := graphql.UnmarshalInt(json.Number(lit))
	return n, err == nil
}

// boolField reads a Boolean.
func (d *inputReader) boolField() (bool, bool) {
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return true, true
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return false, true
	}
	return false, false
}

// enumField reads an enum value named exactly as the schema does.
func enumField[T any](d *inputReader, table map[string]T) (T, bool) {
	var zero T
	start, end, ok := d.str()
	if !ok {
		return zero, false
	}
	v, ok := table[string(d.b[start:end])]
	return v, ok
}

func (d *inputReader) tasks(in *SubmitTasksInput) bool {
	var parallelism int
	var webhook string
	seen, ok := d.fields(func(key []byte) uint32 {
		switch string(key) {
		case "items":
			if !d.items(in) {
				return 0
			}
			return 1
		case "parallelism":
			n, ok := d.intField()
			if !ok {
				return 0
			}
			parallelism, in.Parallelism = n, &parallelism
			return 2
		case "webhookUrl":
			start, end, ok := d.str()
			if !ok {
				return 0
			}
			webhook, in.WebhookURL = string(d.b[start:end]), &webhook
			return 4
		}
		return 0
	})
	return ok && seen&1 != 0
}

// items reads a batch's items into one allocation, as decodeItems does.
func (d *inputReader) items(in *SubmitTasksInput) bool {
	if d.next() != '[' {
		return false
	}
	// The items' count, for one allocation: each item is an object, and
	// the commas between them are outside any string.
	n := countItems(d.b[d.i:])
	if n < 0 {
		return false
	}
	if d.room != nil {
		return false // a second items field: refused by fields anyway
	}
	var slots []batchSlot
	if d.room = getBatchRoom(n); d.room != nil {
		slots, in.Items = d.room.slots, d.room.items
		d.fix = d.room.fix[:0]
	} else {
		slots, in.Items = make([]batchSlot, n), make([]*BatchItemInput, n)
	}
	d.params = make([]paramsFix, 0, n)
	d.i++
	if d.next() == ']' {
		d.i++
		return n == 0
	}
	for k := 0; ; k++ {
		if k >= n {
			return false
		}
		s := &slots[k]
		in.Items[k] = &s.item
		if !d.item(s) {
			return false
		}
		switch d.next() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.copyStrings()
			if d.room != nil {
				d.room.fix = d.fix // emptied, and as large as this batch needed
			}
			d.copyParams()
			return k == n-1
		default:
			return false
		}
	}
}

// copyParams copies the batch's action parameters out of b, into one
// buffer of their size.
func (d *inputReader) copyParams() {
	size := 0
	for _, f := range d.params {
		size += f.end - f.start
	}
	buf := make([]byte, 0, size)
	for _, f := range d.params {
		at := len(buf)
		buf = append(buf, d.b[f.start:f.end]...)
		*f.dst = json.RawMessage(buf[at:len(buf):len(buf)])
	}
	d.params = d.params[:0]
}

// countItems counts the elements of the list at the start of b by its
// top-level commas (-1 if it does not end).
func countItems(b []byte) int {
	depth, n, empty := 0, 0, true
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			empty = false
		case '[', '{':
			depth++
			if depth > 1 {
				empty = false
			}
		case ']', '}':
			depth--
			if depth == 0 {
				if empty {
					return 0
				}
				return n + 1
			}
		case ',':
			if depth == 1 {
				n++
			}
		case ' ', '\t', '\n', '\r':
		default:
			empty = false
		}
	}
	return -1
}

// item reads one item; its strings are copied out of b with the batch's
// (items).
func (d *inputReader) item(s *batchSlot) bool {
	if d.next() != '{' {
		return false
	}
	seen, ok := d.fields(func(key []byte) uint32 {
		switch string(key) {
		case "key":
			if !d.strField(&s.key) {
				return 0
			}
			s.item.Key = &s.key
			return 1
		case "task":
			s.item.Task = &s.task
			if !d.task(&s.task, &s.parts) {
				return 0
			}
			return 2
		}
		return 0
	})
	return ok && seen&2 != 0
}

// copyStrings copies the strings read since fix was last emptied out of b,
// one after the other (not the item's text, which would keep its syntax
// alive too), into allocations of at most textChunk bytes each (or of one
// string's size, if larger): a single task's strings into one, a batch's
// into a few. The engine keeps an admitted task's strings, so a chunk
// stays alive until the last task holding one of its strings is forgotten;
// an allocation an item was an object more per queued task for the
// collector to mark (ADR 0005, finding 27).
func (d *inputReader) copyStrings() {
	for fix := d.fix; len(fix) > 0; {
		n, size := 1, fix[0].end-fix[0].start
		for n < len(fix) && size+fix[n].end-fix[n].start <= textChunk {
			size += fix[n].end - fix[n].start
			n++
		}
		var text strings.Builder
		text.Grow(size)
		for _, f := range fix[:n] {
			text.Write(d.b[f.start:f.end])
		}
		all, at := text.String(), 0
		for _, f := range fix[:n] {
			*f.dst, at = all[at:at+f.end-f.start], at+f.end-f.start
		}
		fix = fix[n:]
	}
	clear(d.fix) // its places point into the items
	d.fix = d.fix[:0]
}

// textChunk bounds the allocations copyStrings copies strings into.
const textChunk = 2048

// Bits of SubmitTaskInput's fields, in the schema's order.
const (
	fAgentID uint32 = 1 << iota
	fLane
	fSessionKey
	fPriority
	fAction
	fInstruction
	fTabID
	fInstanceID
	fDependsOn
	fParentID
	fDeadline
	fTimeoutMs
	fRetryPolicy
	fWebhookURL
	fIdempotencyKey
	fLabels
	fQueueMode
	fExhausted
	fSessionMaxInFlight
	fSessionReplay
)

// task reads a task's input as SubmitTaskInput.decode would.
func (d *inputReader) task(in *SubmitTaskInput, p *taskValues) bool {
	p.priority, in.Priority = engine.PriorityNormal, &p.priority
	p.queueMode, in.QueueMode = engine.QueueEnqueue, &p.queueMode
	p.sessionReplay, in.SessionReplay = false, &p.sessionReplay
	opt := func(bit uint32, dst *string, field **string) uint32 {
		if !d.strField(dst) {
			return 0
		}
		*field = dst
		return bit
	}
	seen, ok := d.fields(func(key []byte) uint32 {
		switch string(key) {
		case "agentId":
			if !d.strField(&in.AgentID) {
				return 0
			}
			return fAgentID
		case "lane":
			return opt(fLane, &p.lane, &in.Lane)
		case "sessionKey":
			return opt(fSessionKey, &p.sessionKey, &in.SessionKey)
		case "priority":
			v, ok := enumField(d, priorities)
			if !ok {
				return 0
			}
			p.priority = v
			return fPriority
		case "action":
			in.Action = &p.action
			if !d.action(&p.action, &p.ref, &p.selector) {
				return 0
			}
			return fAction
		case "instruction":
			return opt(fInstruction, &p.instruction, &in.Instruction)
		case "tabId":
			return opt(fTabID, &p.tabID, &in.TabID)
		case "instanceId":
			return opt(fInstanceID, &p.instanceID, &in.InstanceID)
		case "dependsOn":
			if !d.ids(&in.DependsOn) {
				return 0
			}
			return fDependsOn
		case "parentId":
			return opt(fParentID, &p.parentID, &in.ParentID)
		case "deadline":
			start, end, ok := d.str()
			if !ok {
				return 0
			}
			t, err := graphql.UnmarshalTime(string(d.b[start:end]))
			if err != nil {
				return 0
			}
			p.deadline, in.Deadline = t, &p.deadline
			return fDeadline
		case "timeoutMs":
			n, ok := d.intField()
			if !ok {
				return 0
			}
			p.timeoutMs, in.TimeoutMs = n, &p.timeoutMs
			return fTimeoutMs
		case "retryPolicy":
			in.RetryPolicy = &RetryPolicyInput{}
			if !d.retry(in.RetryPolicy, &retryValues{}) {
				return 0
			}
			return fRetryPolicy
		case "webhookUrl":
			return opt(fWebhookURL, &p.webhookURL, &in.WebhookURL)
		case "idempotencyKey":
			return opt(fIdempotencyKey, &p.idempotencyKey, &in.IdempotencyKey)
		case "labels":
			if !d.labels(&in.Labels) {
				return 0
			}
			return fLabels
		case "queueMode":
			v, ok := enumField(d, queueModes)
			if !ok {
				return 0
			}
			p.queueMode = v
			return fQueueMode
		case "exhausted":
			v, ok := enumField(d, exhaustions)
			if !ok {
				return 0
			}
			p.exhausted, in.Exhausted = v, &p.exhausted
			return fExhausted
		case "sessionMaxInFlight":
			n, ok := d.intField()
			if !ok {
				return 0
			}
			p.sessionMaxInFlight, in.SessionMaxInFlight = n, &p.sessionMaxInFlight
			return fSessionMaxInFlight
		case "sessionReplay":
			v, ok := d.boolField()
			if !ok {
				return 0
			}
			p.sessionReplay = v
			return fSessionReplay
		}
		return 0
	})
	return ok && seen&fAgentID != 0
}

// action reads an action as ActionInput.decode would.
func (d *inputReader) action(in *ActionInput, ref, selector *string) bool {
	seen, ok := d.fields(func(key []byte) uint32 {
		switch string(key) {
		case "kind":
			if !d.strField(&in.Kind) {
				return 0
			}
			return 1
		case "ref":
			if !d.strField(ref) {
				return 0
			}
			in.Ref = ref
			return 2
		case "selector":
			if !d.strField(selector) {
				return 0
			}
			in.Selector = selector
			return 4
		case "params":
			start := d.i
			if !d.plainJSON(0) {
				return 0
			}
			d.params = append(d.params, paramsFix{&in.Params, start, d.i})
			return 8
		}
		return 0
	})
	return ok && seen&1 != 0
}

// plainJSON skips a value that UnmarshalJSON would write back byte for
// byte: compact, object keys sorted and unique, strings of printable
// ASCII without quotes or backslashes.
func (d *inputReader) plainJSON(depth int) bool {
	if d.i >= len(d.b) || depth > maxParamsDepth {
		return false
	}
	b := d.b
	switch c := b[d.i]; {
	case c == '{':
		d.i++
		if d.i < len(b) && b[d.i] == '}' {
			d.i++
			return true
		}
		var prev []byte
		for {
			start, end, ok := d.plainString()
			if !ok {
				return false
			}
			key := b[start:end]
			if prev != nil && bytes.Compare(prev, key) >= 0 {
				return false
			}
			prev = key
			if d.i >= len(b) || b[d.i] != ':' {
				return false
			}
			d.i++
			if !d.plainJSON(depth + 1) {
				return false
			}
			if d.i >= len(b) {
				return false
			}
			switch b[d.i] {
			case ',':
				d.i++
			case '}':
				d.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		d.i++
		if d.i < len(b) && b[d.i] == ']' {
			d.i++
			return true
		}
		for {
			if !d.plainJSON(depth + 1) {
				return false
			}
			if d.i >= len(b) {
				return false
			}
			switch b[d.i] {
			case ',':
				d.i++
			case ']':
				d.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		_, _, ok := d.plainString()
		return ok
	case c == 't':
		_, ok := d.boolField()
		return ok
	case c == 'f':
		_, ok := d.boolField()
		return ok
	case c == 'n':
		if bytes.HasPrefix(b[d.i:], []byte("null")) {
			d.i += 4
			return true
		}
		return false
	case c == '-' || c >= '0' && c <= '9':
		_, ok := d.number()
		return ok
	}
	return false
}

// plainString reads a string of printable ASCII without escapes.
func (d *inputReader) plainString() (start, end int, ok bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return 0, 0, false
	}
	start = d.i + 1
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return start, j, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// retry reads a retry policy as RetryPolicyInput.decode would.
func (d *inputReader) retry(in *RetryPolicyInput, p *retryValues) bool {
	seen, ok := d.fields(func(key []byte) uint32 {
		switch string(key) {
		case "maxAttempts":
			n, ok := d.intField()
			if !ok {
				return 0
			}
			in.MaxAttempts = n
			return 1
		case "backoffMs":
			n, ok := d.intField()
			if !ok {
				return 0
			}
			p.backoffMs, in.BackoffMs = n, &p.backoffMs
			return 2
		case "multiplier":
			lit, ok := d.number()
			if !ok {
				return 0
			}
			if _, err := strconv.ParseFloat(string(lit), 64); err != nil {
				return 0
			}
			f, err := graphql.UnmarshalFloat(json.Number(lit))
			if err != nil {
				return 0
			}
			p.multiplier, in.Multiplier = f, &p.multiplier
			return 4
		case "maxBackoffMs":
			n, ok := d.intField()
			if !ok {
				return 0
			}
			p.maxBackoffMs, in.MaxBackoffMs = n, &p.maxBackoffMs
			return 8
		case "jitter":
			v, ok := d.boolField()
			if !ok {
				return 0
			}
			p.jitter, in.Jitter = v, &p.jitter
			return 16
		}
		return 0
	})
	return ok && seen&1 != 0
}

// list reads a list of non-null elements, calling elem for each.
func (d *inputReader) list(elem func() bool) bool {
	if d.next() != '[' {
		return false
	}
	d.i++
	if d.next() == ']' {
		d.i++
		return true
	}
	for {
		if d.next() == 'n' || !elem() {
			return false
		}
		switch d.next() {
		case ',':
			d.i++
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

// ids reads a list of IDs given as strings.
func (d *inputReader) ids(out *[]string) bool {
	if d.next() != '[' {
		return false
	}
	n := countItems(d.b[d.i:])
	if n < 0 {
		return false
	}
	ids := make([]string, n)
	k := 0
	ok := d.list(func() bool {
		if k >= n {
			return false
		}
		k++
		return d.strField(&ids[k-1])
	})
	*out = ids
	return ok && k == n
}

// labels reads a list of labels as decodeLabels does.
func (d *inputReader) labels(out *[]*LabelInput) bool {
	if d.next() != '[' {
		return false
	}
	n := countItems(d.b[d.i:])
	if n < 0 {
		return false
	}
	labels, ptrs := d.room.labelRoom(n)
	k := 0
	ok := d.list(func() bool {
		if k >= n {
			return false
		}
		l := &labels[k]
		ptrs[k] = l
		k++
		seen, ok := d.fields(func(key []byte) uint32 {
			switch string(key) {
			case "key":
				if !d.strField(&l.Key) {
					return 0
				}
				return 1
			case "value":
				if !d.strField(&l.Value) {
					return 0
				}
				return 2
			}
			return 0
		})
		return ok && seen == 3
	})
	*out = ptrs
	return ok && k == n
}
