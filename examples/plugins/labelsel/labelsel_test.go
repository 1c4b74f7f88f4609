package labelsel_test

import (
	"testing"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/examples/plugins/labelsel"
)

type rec struct {
	session string
	labels  map[string]string
	agent   map[string]string
}

type dets []rec

func (d dets) AgentID(int) string         { return "a" }
func (d dets) LaneName(int) string        { return "main" }
func (d dets) Session(i int) string       { return d[i].session }
func (d dets) Labels(i int) policy.Labels { return policy.MakeLabels(d[i].labels) }
func (d dets) Agent(i int) policy.AgentInfo {
	return policy.AgentInfo{Weight: 1, MaxInFlight: 1, Labels: policy.MakeLabels(d[i].agent)}
}
func (d dets) ErrorCode(int) string { return "" }

func TestRanksByLabelsTierAndSession(t *testing.T) {
	p := labelsel.New()
	if err := p.Configure([]byte(`{"lastSessions": ["later"]}`)); err != nil {
		t.Fatal(err)
	}
	gold := map[string]string{"tier": "gold"}
	d := dets{
		{}, // FIFO
		{labels: map[string]string{"urgent": ""}}, // first
		{agent: gold}, // by priority
		{session: "later", labels: map[string]string{"urgent": "1"}}, // last, whatever its labels
	}
	tasks := []policy.Task{{Seq: 1}, {Seq: 2}, {Seq: 3, Priority: 2}, {Seq: 4}}
	ranks := make([]int64, len(tasks))
	p.RankDetailed(policy.RankContext{Details: d}, tasks, ranks)
	want := []int64{8, 0, 3, 9}
	for i := range want {
		if ranks[i] != want[i] {
			t.Fatalf("ranks %v, want %v", ranks, want)
		}
	}
}

func TestSchemaRefusesAnUnknownField(t *testing.T) {
	err := labelsel.Schema.Validate([]byte(`{"labels": "urgent"}`))
	if err == nil || err.Error() != "config.labels: unknown field" {
		t.Fatalf("got %v", err)
	}
}
