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
	// unasked is set when the host did not ask the plugin: the decision's
	// table would not fit its sandbox (see tableFits; tooLarge is set
	// too), or the runtime or the plugin closed before or during the call.
	// It falls back, and no fault counts: the input's size is the API
	// client's, and closing the runtime the server's, not the plugin's.
	unasked  bool
	tooLarge bool
}

// tableFits reports whether a decision whose arena needs need bytes, with
// its names or details table, may be sent: at most half the guest's
// memory cap, the rest being the guest's own. Labels are the API client's
// to choose (64 of up to 512 bytes per task, 100 tasks a batch), so a
// table can outgrow any guest; such a decision falls back without asking.
func (p *Plugin) tableFits(need uint32) bool {
	return uint64(need) <= uint64(p.rt.cfg.MemoryLimitPages)*(64<<10)/2
}

// callFault turns a call error into a fault.
func (in *instance) callFault(err error) fault {
	if errors.Is(err, errStopped) {
		return fault{unasked: true} // the runtime closed: fall back, no fault
	}
	if errors.Is(err, errHalted) {
		// The runtime closed during the call: fall back, no fault, and
		// the instance, stopped mid-call, is not used again.
		return fault{unasked: true, broken: true}
	}
	if errors.Is(err, errRefused) {
		return fault{kind: FaultRefused, reason: err.Error()}
	}
	kind, reason := in.describe(err)
	return fault{kind: kind, reason: reason, broken: true}
}

// timed runs the slot's export and records its latency, read from the
// monotonic clock alone (time.Now reads the wall clock too, which costs as
// much again here), and the fuel it burnt, unless the host stopped it.
func (in *instance) timed() error {
	err := in.call(in.decide)
	if in.phase != phaseLoad { // a smoke decision is not one asked of the plugin
		in.plugin.stats.observe(in.took()) // the call alone: the clock is read once more
	}
	if !in.tankEmptied() && (err == nil || !stoppedByHost(err)) {
		in.plugin.stats.fuel.max(uint64(max(in.burnt, 0)))
	}
	return err
}

// tankEmptied reports whether the watchdog emptied the last call's tank
// while it ran: it expired or halted it, or found it over its CPU time.
// Such a call is left out of Stats.FuelMax whatever its error: one that
// ended before its next metered point returns no error, yet its emptied
// tank's unspent units would count as burnt. (The watchdog writes these
// under mu while the call runs; callWith has taken mu since, on this
// goroutine.)
func (in *instance) tankEmptied() bool { return in.expired.Load() || in.overCPU }

// stoppedByHost reports whether a call's error says the host stopped it
// (its deadline, its CPU time, a close) rather than the guest ending or
// running out of fuel. The fuel such a call burnt depends on the machine
// and its load, so Stats.FuelMax, which is deterministic, leaves it out;
// it would also count the stopped tank's unspent units.
func stoppedByHost(err error) bool {
	return errors.Is(err, errDeadline) || errors.Is(err, errCPU) || errors.Is(err, errHalted) || errors.Is(err, errStopped)
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
	entry := in.plugin.entry()
	if entry >= abi.DetailEntrySize && ctx.Details == nil {
		entry = abi.NameEntrySize
	}
	names := entry != 0 && ctx.Names != nil
	if names {
		namesAt = abi.TableOffset(need)
		need = namesAt + abi.TableBytes(n, entry, ctx.Names, ctx.Details)
		if !in.plugin.tableFits(need) {
			return 0, fault{unasked: true, tooLarge: true}
		}
	}
	if err := in.ensureArena(need); err != nil {
		return 0, in.callFault(err)
	}
	b := in.view(need)
	abi.PutHeader(b, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.CandidateSize, Count: n, NamesOffset: namesAt})
	abi.PutCandidates(b[abi.HeaderSize:], cands)
	if names {
		abi.PutTable(b, namesAt, n, entry, ctx.Names, ctx.Details)
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
		why := "fairness_pick returned an error"
		if k <= abi.HoldBase && k >= abi.HoldBase-abi.MaxHoldHintMs {
			// Only a version 1 module gets here with a hold's value.
			why = fmt.Sprintf("fairness_pick returned a hold (%d), which ABI version %d does not have: a module that holds declares abi_version 2", k, in.plugin.version)
		}
		return 0, fault{kind: FaultRefused, reason: in.reasonOr(why)}
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

// tableFor returns the entry size of the table a decision with details d
// writes for the plugin: 0 when the module asked for none or d is nil.
func (p *Plugin) tableFor(d policy.Details) uint32 {
	if d == nil {
		return 0
	}
	return p.entry()
}

// rank makes a selection decision, writing into ranks. d, when not nil,
// gives the tasks' details (ABI v2).
func (in *instance) rank(nowMs int64, d policy.Details, tasks []policy.Task, ranks []int64) fault {
	n := uint32(len(tasks))
	need := abi.SelectionBytes(n)
	var namesAt uint32
	entry := in.plugin.tableFor(d)
	if entry != 0 {
		namesAt = abi.TableOffset(need)
		need = namesAt + abi.TableBytes(n, entry, d, d)
		if !in.plugin.tableFits(need) {
			return fault{unasked: true, tooLarge: true}
		}
	}
	if err := in.ensureArena(need); err != nil {
		return in.callFault(err)
	}
	b := in.view(need)
	abi.PutHeader(b, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.TaskSize, Count: n, NamesOffset: namesAt})
	abi.PutTasks(b[abi.HeaderSize:], tasks)
	if entry != 0 {
		abi.PutTable(b, namesAt, n, entry, d, d)
	}
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

// decideRetry makes a retry decision. d, when not nil, gives the task's
// details (ABI v2).
func (in *instance) decideRetry(det policy.Details, f *policy.Failure) (policy.Decision, fault) {
	need := uint32(abi.RetryBytes)
	var namesAt uint32
	entry := in.plugin.tableFor(det)
	if entry != 0 {
		namesAt = abi.TableOffset(need)
		need = namesAt + abi.TableBytes(1, entry, det, det)
		if !in.plugin.tableFits(need) {
			return policy.Decision{}, fault{unasked: true, tooLarge: true}
		}
	}
	if err := in.ensureArena(need); err != nil {
		return policy.Decision{}, in.callFault(err)
	}
	b := in.view(need)
	abi.PutHeader(b, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.FailureSize, Count: 1, NamesOffset: namesAt})
	abi.PutFailure(b[abi.HeaderSize:], f)
	if entry != 0 {
		abi.PutTable(b, namesAt, 1, entry, det, det)
	}
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

// outcome says how a plugin decision ended: decided, or why it fell back.
type outcome uint8

const (
	decided    outcome = iota // the plugin answered validly
	faulted                   // a fault was recorded: fall back
	out                       // quarantined or disabled: fall back
	closed                    // the plugin or the runtime is closed, or closed during the call: fall back
	rebuilding                // no instance: one is being rebuilt after a fault; fall back
	tooLarge                  // the decision's table would not fit the plugin's memory: fall back unasked
)

// result is how a plugin decision ended, and its fault when it faulted.
type result struct {
	o outcome
	f fault
}

// finish returns the instance (or discards a broken one) and accounts for
// the decision.
func (p *Plugin) finish(in *instance, f fault) result {
	if f.unasked {
		if f.broken {
			p.discard(in)
		} else {
			p.release(in)
		}
		if f.tooLarge {
			return result{o: tooLarge}
		}
		return result{o: closed}
	}
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
		return result{}
	}
	p.fault(f.kind, f.reason, took)
	return result{o: faulted, f: f}
}

// finishDry is finish for a dry-run decision (policy.PickDryRun: a plan's
// preview): it returns the instance (or discards a broken one) but leaves
// the breaker alone. A fault is counted apart (Stats.DryRunFaults), not in
// Stats.Faults, and is no plugin event; a success forgives nothing and
// counts no probation down. So a reader who previews cannot quarantine a
// plugin, nor end its probation, and so cannot change what it decides for
// real dispatch.
func (p *Plugin) finishDry(in *instance, f fault) result {
	if f.unasked {
		return p.finish(in, f) // which feeds the breaker nothing
	}
	if f.broken {
		p.discard(in)
	} else {
		p.release(in)
	}
	if f.kind == 0 {
		return result{}
	}
	p.stats.dryRunFaults.Add(1)
	return result{o: faulted, f: f}
}

// fellBack says, for people, why a decision that ended in r fell back:
// the reason a policy.ExplainedRetry or policy.ExplainedFairness gives.
// Only a fallback pays for it.
func (p *Plugin) fellBack(r result) string {
	switch r.o {
	case faulted:
		return "it faulted: " + r.f.kind.String() + ": " + r.f.reason
	case out:
		switch st, why, _ := p.state(); st {
		case StateQuarantined:
			return why
		case StateDisabled:
			return "disabled: " + why
		}
		return "quarantined" // and over just now: the next decision asks it again
	case closed:
		return "it is closed"
	case rebuilding:
		return "its instance is being rebuilt after a fault or a reset to no configuration"
	case tooLarge:
		return "the decision's names and details would not fit its memory, so it was not asked"
	}
	return ""
}

func (p *Plugin) pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) (int, result) {
	in, r := p.begin()
	if in == nil {
		return 0, r
	}
	n, f := in.pick(ctx, cands, picks)
	if ctx.Flags&policy.PickDryRun != 0 {
		return n, p.finishDry(in, f)
	}
	return n, p.finish(in, f)
}

func (p *Plugin) rank(nowMs int64, d policy.Details, tasks []policy.Task, ranks []int64) result {
	in, r := p.begin()
	if in == nil {
		return r
	}
	return p.finish(in, in.rank(nowMs, d, tasks, ranks))
}

func (p *Plugin) decide(det policy.Details, f *policy.Failure) (policy.Decision, result) {
	in, r := p.begin()
	if in == nil {
		return policy.Decision{}, r
	}
	d, ft := in.decideRetry(det, f)
	return d, p.finish(in, ft)
}
