//go:build wasip1

// Command badretry is a retry plugin whose answers break the contract on
// demand: {"mode": "ok" | "action" | "negative" | "huge"}.
package main

import (
	"bytes"
	"errors"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/retry"
)

type badRetry struct{ mode string }

// Configure takes {"mode": "..."}. It looks for a mode's quoted name
// rather than parsing JSON: encoding/json would double the module, and so
// the time the tests spend compiling it.
func (b *badRetry) Configure(doc []byte) error {
	for _, m := range []string{"ok", "action", "negative", "huge"} {
		if bytes.Contains(doc, []byte(`"`+m+`"`)) {
			b.mode = m
			return nil
		}
	}
	return errors.New("unknown mode")
}

func (b *badRetry) Decide(f policy.Failure) policy.Decision {
	switch b.mode {
	case "action":
		return policy.Decision{Action: 9}
	case "negative":
		return policy.Decision{Action: policy.ActionRetry, DelayMs: -5}
	case "huge":
		return policy.Decision{Action: policy.ActionRetry, DelayMs: policy.MaxRetryDelayMs + 1}
	}
	return policy.Decision{Action: policy.ActionRetry, DelayMs: 1234}
}

func init() { retry.Register(&badRetry{}) }

func main() {}
