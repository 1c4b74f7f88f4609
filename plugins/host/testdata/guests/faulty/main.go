//go:build wasip1

// Command faulty is a fairness plugin that misbehaves on demand, for the
// host's containment tests. Its configuration picks the fault:
// {"mode": "ok" | "loop" | "panic" | "range" | "count" | "alloc" | "refuse"}.
package main

import (
	"encoding/json"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/fairness"
)

type faulty struct{ mode string }

var sink [][]byte

func (f *faulty) Configure(doc []byte) error {
	var c struct{ Mode string }
	if err := json.Unmarshal(doc, &c); err != nil {
		return err
	}
	f.mode = c.Mode
	return nil
}

func (f *faulty) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	switch f.mode {
	case "loop":
		for x := 0; ; x++ {
			if x < 0 {
				return 0
			}
		}
	case "panic":
		var m map[string]int
		m["boom"] = 1
	case "range":
		if len(picks) > 0 {
			picks[0] = uint32(len(cands) + 5)
			return 1
		}
	case "count":
		return len(picks) + 1
	case "alloc":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "refuse":
		return -1
	}
	n := 0
	for n < len(picks) && n < len(cands) {
		picks[n] = uint32(n)
		n++
	}
	return n
}

func init() { fairness.Register(&faulty{}) }

func main() {}
