//go:build wasip1

// Command badretry is a retry plugin whose answers break the contract on
// demand: {"mode": "ok" | "action" | "negative" | "huge"}.
package main

import (
	"encoding/json"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/retry"
)

type badRetry struct{ mode string }

func (b *badRetry) Configure(doc []byte) error {
	var c struct{ Mode string }
	if err := json.Unmarshal(doc, &c); err != nil {
		return err
	}
	b.mode = c.Mode
	return nil
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
