// Package lanepri is a fairness policy that serves lanes by priority, with
// aging so that no lane starves: a queue head's effective priority is its
// lane's priority plus one for every AgingStepMs it has waited, and the
// head with the highest effective priority goes next (then the older head).
//
// Lanes are the indexes the engine gives them, in the order of its lane
// configuration (0 for the first lane). The priority table comes from the
// plugin's configuration, a JSON object keyed by lane index:
//
//	{"priorities": {"0": 0, "1": 10}, "default": 0, "agingStepMs": 5000}
//
// A lane missing from the table has the default priority. With the
// configuration above, heads of lane 1 go before those of lane 0 until a
// lane-0 head has waited 50 s, when it ties with fresh lane-1 heads and,
// being older, goes first. agingStepMs 0 means the engine's aging
// threshold (PickContext.AgingMs), and no aging if that is 0 too.
package lanepri

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/room"
)

// Config is the plugin's configuration document.
type Config struct {
	Priorities  map[string]int64 `json:"priorities"`  // lane index → priority; higher goes first
	Default     int64            `json:"default"`     // the priority of a lane not in Priorities
	AgingStepMs int64            `json:"agingStepMs"` // waiting this long adds 1; 0 = the engine's aging threshold
}

// Policy is the lane-priority policy. The zero value treats every lane
// alike (then it is oldest head first, with the engine's aging).
type Policy struct {
	prio   map[uint16]int64
	def    int64
	stepMs int64
	room   room.Tracker
	// lanePrio is scratch: each candidate's lane priority during a
	// decision, read from prio once (a map lookup costs a WebAssembly
	// module far more than a slice read).
	lanePrio []int64
}

// Configure implements sdk.Configurable.
func (p *Policy) Configure(doc []byte) error {
	var c Config
	if err := json.Unmarshal(doc, &c); err != nil {
		return err
	}
	if c.AgingStepMs < 0 {
		return errors.New("agingStepMs must not be negative")
	}
	prio := make(map[uint16]int64, len(c.Priorities))
	for k, v := range c.Priorities {
		lane, err := strconv.ParseUint(k, 10, 16)
		if err != nil {
			return fmt.Errorf("priorities: %q is not a lane index (0, 1, …)", k)
		}
		prio[uint16(lane)] = v
	}
	p.prio, p.def, p.stepMs = prio, c.Default, c.AgingStepMs
	return nil
}

// Pick implements policy.Fairness.
func (p *Policy) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	step := p.stepMs
	if step == 0 {
		step = ctx.AgingMs
	}
	p.room.Reset(cands)
	p.lanePrio = p.lanePrio[:0]
	for i := range cands {
		pr, ok := p.prio[cands[i].Lane]
		if !ok {
			pr = p.def
		}
		p.lanePrio = append(p.lanePrio, pr)
	}
	n := 0
	for n < len(picks) {
		best, bestPrio := -1, int64(0)
		for i := range cands {
			if !p.room.Has(i) {
				continue
			}
			pr := effective(p.lanePrio[i], &cands[i], p.room.Taken(i), step)
			if best < 0 || pr > bestPrio || pr == bestPrio && cands[i].HeadSeq < cands[best].HeadSeq {
				best, bestPrio = i, pr
			}
		}
		if best < 0 {
			break
		}
		picks[n] = uint32(best)
		n++
		p.room.Take(best)
	}
	return n
}

// effective is a head's priority: its lane's (pr), plus its aging. After
// taken picks from the queue the head is a later task whose wait is
// unknown, so it does not age.
func effective(pr int64, c *policy.Candidate, taken uint32, step int64) int64 {
	if step > 0 && taken == 0 && c.HeadWaitMs > 0 {
		pr += c.HeadWaitMs / step
	}
	return pr
}
