// Package ratecap is a fairness policy that caps how many tasks each agent
// starts per window (ABI v2): a head whose agent has started its quota in
// the last window is passed over, and when every head is, the policy holds
// — the engine dispatches nothing from them and asks again when the oldest
// start leaves the window — instead of leaving the slot to the engine's
// native order, which would hand it to a capped agent anyway.
//
// It keeps state between decisions (the recent starts of each agent, by the
// stable key of its id), so it is registered without sdk.Stateless, with
// sdk.Names and sdk.Holds.
package ratecap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/room"
)

// RateCap is the policy. The zero value starts one task per agent per
// second.
type RateCap struct {
	// PerWindow is how many tasks an agent may start per window (default 1).
	PerWindow int `json:"perWindow"`
	// WindowMs is the window's length (default 1000).
	WindowMs int64 `json:"windowMs"`

	starts map[uint64][]int64 // agent key -> start times in the window, oldest first
	keys   []uint64           // scratch: per candidate
	room   room.Tracker
}

// Configure implements sdk.Configurable: {"perWindow": N, "windowMs": MS}.
func (r *RateCap) Configure(doc []byte) error {
	var c RateCap
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return fmt.Errorf("ratecap: %w", err)
	}
	if c.PerWindow < 0 || c.WindowMs < 0 {
		return errors.New("ratecap: perWindow and windowMs must not be negative")
	}
	r.PerWindow, r.WindowMs = c.PerWindow, c.WindowMs
	return nil
}

// Pick implements policy.Fairness.
func (r *RateCap) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	per, window := r.PerWindow, r.WindowMs
	if per == 0 {
		per = 1
	}
	if window == 0 {
		window = 1000
	}
	if r.starts == nil {
		r.starts = map[uint64][]int64{}
	}
	r.keys = r.keys[:0]
	for i := range cands {
		var id string
		if ctx.Names != nil {
			id = ctx.Names.AgentID(i)
		}
		k := policy.Key(id)
		r.keys = append(r.keys, k)
		s := r.starts[k]
		for len(s) > 0 && s[0] <= ctx.NowMs-window { // forget starts out of the window
			s = s[1:]
		}
		r.starts[k] = s
	}
	dry := ctx.Flags&policy.PickDryRun != 0
	r.room.Reset(cands)
	taken := map[uint64]int{} // this decision's picks, per agent
	n, capped := 0, false
	for n < len(picks) {
		best := -1
		for i := range cands {
			if !r.room.Has(i) {
				continue
			}
			if len(r.starts[r.keys[i]])+taken[r.keys[i]] >= per {
				capped = true
				continue
			}
			if best < 0 || cands[i].HeadWaitMs > cands[best].HeadWaitMs {
				best = i
			}
		}
		if best < 0 {
			break
		}
		r.room.Take(best)
		taken[r.keys[best]]++
		picks[n] = uint32(best)
		n++
	}
	if n == 0 && capped {
		// Every head's agent is at its cap: hold until the earliest start
		// leaves the window.
		next := int64(-1)
		for _, k := range r.keys {
			if s := r.starts[k]; len(s) > 0 && (next < 0 || s[0] < next) {
				next = s[0]
			}
		}
		return policy.Hold(max(next+window-ctx.NowMs, 1))
	}
	if !dry {
		for _, p := range picks[:n] {
			k := r.keys[p]
			r.starts[k] = append(r.starts[k], ctx.NowMs)
		}
	}
	return n
}

// MayHold implements policy.Holder.
func (r *RateCap) MayHold() bool { return true }
