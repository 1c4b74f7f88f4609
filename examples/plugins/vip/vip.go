// Package vip is a fairness policy that serves named agents first (ABI v2):
// the heads of the agents listed in its configuration go before every other
// head, oldest first, and the rest follow oldest first. It reads agent ids
// through PickContext.Names, so it is registered with sdk.Names; the names
// are the ids clients submit with, the same on every server and across
// restarts.
package vip

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/room"
)

// VIP is the policy.
type VIP struct {
	// Agents are served first.
	Agents []string `json:"agents"`

	order []int // scratch: candidate indices in serving order
	room  room.Tracker
}

// Configure implements sdk.Configurable: {"agents": ["id", ...]}.
func (v *VIP) Configure(doc []byte) error {
	var c VIP
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return fmt.Errorf("vip: %w", err)
	}
	v.Agents = c.Agents
	return nil
}

// Pick implements policy.Fairness.
func (v *VIP) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	v.order = v.order[:0]
	for i := range cands {
		v.order = append(v.order, i)
	}
	vip := func(i int) bool { return ctx.Names != nil && slices.Contains(v.Agents, ctx.Names.AgentID(i)) }
	slices.SortStableFunc(v.order, func(a, b int) int {
		va, vb := vip(a), vip(b)
		switch {
		case va && !vb:
			return -1
		case vb && !va:
			return 1
		case cands[a].HeadWaitMs != cands[b].HeadWaitMs:
			return int(cands[b].HeadWaitMs - cands[a].HeadWaitMs) // older first
		}
		return 0
	})
	v.room.Reset(cands)
	n := 0
	for _, i := range v.order {
		for n < len(picks) && v.room.Has(i) {
			v.room.Take(i)
			picks[n] = uint32(i)
			n++
		}
	}
	return n
}
