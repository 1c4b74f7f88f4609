// Package errcode is a retry policy that decides by the failed attempt's
// error code and the task's labels (ABI v2, sdk.Details): a code listed in
// "fail" (by default the instance's codes for a selector or an action
// that cannot work) fails the task at once, as does a task labelled
// retry=never; a code listed in "immediate" (by default a lost tab and an
// instance fault: the next attempt goes elsewhere) retries at once; any
// other failure backs off from the lane's base delay by backoffFactor per
// attempt, up to the lane's cap. When the attempts are spent the task is
// parked, as with the built-in backoff.
package errcode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/schema"
)

// Schema is the policy's configuration schema (sdk.ConfigSchema).
var Schema = &schema.Schema{
	Type:                 "object",
	AdditionalProperties: schema.Ptr(false),
	Properties: map[string]*schema.Schema{
		"fail":          {Type: "array", MaxItems: schema.Ptr(64), Items: &schema.Schema{Type: "string", MinLength: schema.Ptr(1)}},
		"immediate":     {Type: "array", MaxItems: schema.Ptr(64), Items: &schema.Schema{Type: "string", MinLength: schema.Ptr(1)}},
		"backoffFactor": {Type: "number", Minimum: schema.Ptr(1.0), Maximum: schema.Ptr(10.0)},
	},
}

// Policy is the policy.
type Policy struct {
	Fail          []string `json:"fail"`
	Immediate     []string `json:"immediate"`
	BackoffFactor float64  `json:"backoffFactor"`
}

// New returns the policy with its defaults.
func New() *Policy {
	return &Policy{
		Fail:          []string{"element_not_found", "invalid_selector", "unknown_action"},
		Immediate:     []string{"tab_not_found", "instance_fault"},
		BackoffFactor: 2,
	}
}

// Configure implements sdk.Configurable. The host has checked doc against
// Schema already; fields left out keep their defaults.
func (p *Policy) Configure(doc []byte) error {
	c := *New()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return fmt.Errorf("errcode: %w", err)
	}
	*p = c
	return nil
}

// Decide implements policy.Retry: without details, the backoff alone.
func (p *Policy) Decide(f policy.Failure) policy.Decision {
	return p.DecideDetailed(policy.RetryContext{}, f)
}

// DecideDetailed implements policy.DetailedRetry.
func (p *Policy) DecideDetailed(ctx policy.RetryContext, f policy.Failure) policy.Decision {
	var code string
	if d := ctx.Details; d != nil {
		code = d.ErrorCode(0)
		if v, _ := d.Labels(0).Get("retry"); v == "never" {
			return policy.Decision{Action: policy.ActionFail}
		}
	}
	switch {
	case code != "" && slices.Contains(p.Fail, code):
		return policy.Decision{Action: policy.ActionFail}
	case f.Class == policy.ClassPermanent:
		return policy.Decision{Action: policy.ActionFail}
	case f.Attempt >= f.MaxAttempts:
		return policy.Decision{Action: policy.ActionPark}
	case code != "" && slices.Contains(p.Immediate, code):
		return policy.Decision{Action: policy.ActionRetry}
	}
	d := float64(max(f.BaseDelayMs, 0))
	for range max(int(f.Attempt)-1, 0) {
		d *= p.BackoffFactor
		if d >= float64(f.MaxDelayMs) {
			break
		}
	}
	delay := min(int64(d), max(f.MaxDelayMs, 0), policy.MaxRetryDelayMs)
	return policy.Decision{Action: policy.ActionRetry, DelayMs: delay}
}
