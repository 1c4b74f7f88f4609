// Package drr is a deficit-round-robin fairness policy: queues take turns,
// and on its turn a queue may send up to Quantum × weight tasks before the
// next queue's turn. Bursts are bounded by the quantum, and the turn
// carries over from one decision to the next, so the order is the same
// whether the engine asks for one slot at a time or many.
//
// It keeps state between decisions (whose turn it is and what is left of
// it): register it without sdk.Stateless.
package drr

import (
	"encoding/json"
	"errors"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/room"
)

// DRR is the policy. The zero value serves one task per turn.
type DRR struct {
	// Quantum is how many tasks a queue of weight 1 sends per turn.
	Quantum uint32 `json:"quantum"`

	ring   []queue // queues in turn order
	cursor int     // whose turn it is
	saved  []queue // scratch for dry runs
	room   room.Tracker
}

type queue struct {
	agent   uint32
	lane    uint16
	deficit int64 // tasks left in the current turn; 0 = the turn has not started
	cand    int32 // candidate index in this decision, -1 when absent
}

// Configure implements sdk.Configurable: {"quantum": N}.
func (d *DRR) Configure(doc []byte) error {
	var c struct {
		Quantum uint32 `json:"quantum"`
	}
	if err := json.Unmarshal(doc, &c); err != nil {
		return err
	}
	if c.Quantum == 0 || c.Quantum > 1000 {
		return errors.New("quantum must be in [1, 1000]")
	}
	d.Quantum = c.Quantum
	return nil
}

// Pick implements policy.Fairness.
func (d *DRR) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	if ctx.Flags&policy.PickDryRun != 0 {
		d.saved = append(d.saved[:0], d.ring...)
		cursor := d.cursor
		defer func() { d.ring, d.cursor = append(d.ring[:0], d.saved...), cursor }()
	}
	d.sync(cands)
	quantum := int64(max(d.Quantum, 1))
	n, idle, resume := 0, 0, -1
	for n < len(picks) && len(d.ring) > 0 && idle < len(d.ring) {
		q := &d.ring[d.cursor]
		c := &cands[q.cand]
		if d.room.Taken(int(q.cand)) >= c.QueueLen {
			q.deficit = 0 // emptied: its turn ends and nothing carries over
			d.cursor = (d.cursor + 1) % len(d.ring)
			idle++
			continue
		}
		if !d.room.Has(int(q.cand)) {
			// Its agent or lane is full, so the engine would skip the
			// pick: serve the queues after it for now, and give it the
			// rest of its turn first in the next decision.
			if resume < 0 {
				resume = d.cursor
			}
			d.cursor = (d.cursor + 1) % len(d.ring)
			idle++
			continue
		}
		if q.deficit == 0 {
			q.deficit = quantum * int64(max(c.AgentWeight, 1))
		}
		picks[n] = uint32(q.cand)
		n++
		d.room.Take(int(q.cand))
		idle = 0
		if q.deficit--; q.deficit == 0 {
			d.cursor = (d.cursor + 1) % len(d.ring)
		}
	}
	if resume >= 0 {
		d.cursor = resume
	}
	return n
}

// sync matches the ring to this decision's candidates: known queues keep
// their place and deficit, vanished ones leave, new ones join at the end.
func (d *DRR) sync(cands []policy.Candidate) {
	d.room.Reset(cands)
	for i := range d.ring {
		d.ring[i].cand = -1
	}
	for i := range cands {
		found := false
		for j := range d.ring {
			if d.ring[j].agent == cands[i].Agent && d.ring[j].lane == cands[i].Lane {
				d.ring[j].cand, found = int32(i), true
				break
			}
		}
		if !found {
			d.ring = append(d.ring, queue{agent: cands[i].Agent, lane: cands[i].Lane, cand: int32(i)})
		}
	}
	kept := d.ring[:0]
	for i, q := range d.ring {
		if q.cand >= 0 {
			kept = append(kept, q)
		} else if i < d.cursor {
			d.cursor--
		}
	}
	d.ring = kept
	if d.cursor >= len(d.ring) {
		d.cursor = 0
	}
}
