//go:build wasip1

// Command faulty is a fairness plugin that misbehaves on demand, for the
// host's containment tests. Its configuration picks the fault:
// {"mode": "ok" | "loop" | "panic" | "range" | "count" | "alloc" | "refuse"}.
package main

import (
	"bytes"
	"errors"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/fairness"
)

type faulty struct{ mode string }

var sink [][]byte

// Configure takes {"mode": "..."}. It looks for a mode's quoted name
// rather than parsing JSON: encoding/json would double the module, and so
// the time the tests spend compiling it.
func (f *faulty) Configure(doc []byte) error {
	for _, m := range []string{"ok", "loop", "panic", "range", "count", "alloc", "refuse"} {
		if bytes.Contains(doc, []byte(`"`+m+`"`)) {
			f.mode = m
			return nil
		}
	}
	return errors.New("unknown mode")
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
