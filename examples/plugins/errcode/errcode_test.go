package errcode_test

import (
	"testing"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/examples/plugins/errcode"
)

type one struct {
	code   string
	labels map[string]string
}

func (o one) AgentID(int) string         { return "a" }
func (o one) LaneName(int) string        { return "main" }
func (o one) Session(int) string         { return "" }
func (o one) Labels(int) policy.Labels   { return policy.MakeLabels(o.labels) }
func (o one) Agent(int) policy.AgentInfo { return policy.AgentInfo{} }
func (o one) ErrorCode(int) string       { return o.code }

func TestDecidesByCodeAndLabels(t *testing.T) {
	p := errcode.New()
	f := policy.Failure{BaseDelayMs: 1000, MaxDelayMs: 5000, Attempt: 3, MaxAttempts: 5, Class: policy.ClassTransient}
	for _, c := range []struct {
		d    one
		want policy.Decision
	}{
		{one{code: "element_not_found"}, policy.Decision{Action: policy.ActionFail}},
		{one{code: "tab_not_found"}, policy.Decision{Action: policy.ActionRetry}},
		{one{code: "other"}, policy.Decision{Action: policy.ActionRetry, DelayMs: 4000}},
		{one{code: "tab_not_found", labels: map[string]string{"retry": "never"}}, policy.Decision{Action: policy.ActionFail}},
	} {
		if got := p.DecideDetailed(policy.RetryContext{Details: c.d}, f); got != c.want {
			t.Errorf("%+v: got %+v, want %+v", c.d, got, c.want)
		}
	}
	f.Attempt = 5
	if got := p.DecideDetailed(policy.RetryContext{Details: one{code: "tab_not_found"}}, f); got.Action != policy.ActionPark {
		t.Errorf("spent attempts: got %+v", got)
	}
}

func TestSchemaNamesTheField(t *testing.T) {
	err := errcode.Schema.Validate([]byte(`{"backoffFactor": 20}`))
	if err == nil || err.Error() != "config.backoffFactor: must be ≤ 10" {
		t.Fatalf("got %v", err)
	}
}
