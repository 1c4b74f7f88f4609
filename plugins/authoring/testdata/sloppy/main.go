//go:build wasip1

// Command sloppy is a fairness plugin with the mistakes `plugin check`
// exists to catch, one per configuration: {"mode": "ok" | "stateful" |
// "big" | "wide" | "empty" | "sticky" | "greedy" | "holder" | "preview"}. Every mode passes the host's
// smoke decision.
package main

import (
	"bytes"
	"errors"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/fairness"
)

type sloppy struct {
	mode  string
	calls int
}

// Configure takes {"mode": "..."}. It looks for the mode's name rather than
// parsing JSON, which keeps the module small and quick to compile.
func (s *sloppy) Configure(doc []byte) error {
	for _, m := range []string{"ok", "stateful", "big", "wide", "empty", "sticky", "greedy", "holder", "preview"} {
		if bytes.Contains(doc, []byte(`"`+m+`"`)) {
			s.mode = m
			return nil
		}
	}
	if s.mode == "sticky" { // forgets to refuse a document it does not understand
		return nil
	}
	return errors.New(`want {"mode": "ok" | "stateful" | "big" | "wide" | "empty" | "sticky" | "greedy" | "holder" | "preview"}`)
}

func (s *sloppy) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	s.calls++
	switch s.mode {
	case "stateful": // declared stateless, yet its answers depend on earlier calls
		if len(picks) > 0 && len(cands) > 1 {
			picks[0] = uint32(s.calls % len(cands))
			return 1
		}
	case "big": // out of range once the candidates are many
		if len(cands) > 100 && len(picks) > 0 {
			picks[0] = uint32(len(cands))
			return 1
		}
	case "wide": // out of range only when the candidates and the slots are many
		if len(cands) > 100 && len(picks) > 32 {
			picks[0] = uint32(len(cands))
			return 1
		}
	case "empty": // assumes there is always a candidate
		_ = cands[0]
	case "holder": // holds a lone candidate, and never registered sdk.Holds
		if len(cands) == 1 {
			return policy.Hold(250)
		}
	case "preview": // previews (DRY_RUN) otherwise than it decides: the last candidate first
		if ctx.Flags&policy.PickDryRun != 0 && len(cands) > 1 && len(picks) > 0 {
			picks[0] = uint32(len(cands) - 1)
			return 1
		}
	case "greedy": // runs out of fuel once the candidates are many
		if len(cands) > 100 {
			for x := 0; ; x++ {
				if x < 0 {
					return 0
				}
			}
		}
	}
	n := 0
	for n < len(picks) && n < len(cands) {
		picks[n] = uint32(n)
		n++
	}
	return n
}

func init() { fairness.Register(&sloppy{}, sdk.Stateless) }

func main() {}
