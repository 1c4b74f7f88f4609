// Package labelsel is a selection policy that reads the tasks' details
// (ABI v2, sdk.Details): within each agent's queue, a task carrying the
// configured label (default "urgent", any value) goes first; then, for an
// agent whose configured tier label (default "tier") has the configured
// value (default "gold"), the tasks in priority order; everyone else's in
// submission order (FIFO). A task with a session runs in its session's
// order anyway (the engine runs a session's tasks one at a time); this
// policy only lets a task of a session named in "lastSessions" go after
// the rest of its agent's queue.
package labelsel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/schema"
)

// Schema is the policy's configuration schema (sdk.ConfigSchema): the host
// refuses a configuration that does not satisfy it, naming the field.
var Schema = &schema.Schema{
	Type:                 "object",
	AdditionalProperties: schema.Ptr(false),
	Properties: map[string]*schema.Schema{
		"label":        {Type: "string", MinLength: schema.Ptr(1), MaxLength: schema.Ptr(256), Description: "the label that puts a task first"},
		"tierLabel":    {Type: "string", MinLength: schema.Ptr(1), MaxLength: schema.Ptr(256), Description: "the agent label that names its tier"},
		"tier":         {Type: "string", MaxLength: schema.Ptr(256), Description: "the tier whose agents' tasks go in priority order"},
		"lastSessions": {Type: "array", MaxItems: schema.Ptr(64), Items: &schema.Schema{Type: "string", MinLength: schema.Ptr(1)}, Description: "sessions whose tasks go last"},
	},
}

// Policy is the policy.
type Policy struct {
	Label        string   `json:"label"`
	TierLabel    string   `json:"tierLabel"`
	Tier         string   `json:"tier"`
	LastSessions []string `json:"lastSessions"`
}

// New returns the policy with its defaults.
func New() *Policy { return &Policy{Label: "urgent", TierLabel: "tier", Tier: "gold"} }

// Configure implements sdk.Configurable. The host has checked doc against
// Schema already.
func (p *Policy) Configure(doc []byte) error {
	c := *New()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return fmt.Errorf("labelsel: %w", err)
	}
	*p = c
	return nil
}

// Ranks, lower first.
const (
	rankLabelled = 0
	rankTier     = 1 // + the task's priority (0..3)
	rankOther    = 8
	rankLast     = 9
)

// Rank implements policy.Selection: without details, FIFO.
func (p *Policy) Rank(nowMs int64, tasks []policy.Task, ranks []int64) {
	for i := range ranks {
		ranks[i] = rankOther
	}
}

// RankDetailed implements policy.DetailedSelection.
func (p *Policy) RankDetailed(ctx policy.RankContext, tasks []policy.Task, ranks []int64) {
	d := ctx.Details
	if d == nil {
		p.Rank(ctx.NowMs, tasks, ranks)
		return
	}
	for i, t := range tasks {
		switch {
		case slices.Contains(p.LastSessions, d.Session(i)) && d.Session(i) != "":
			ranks[i] = rankLast
		case has(d.Labels(i), p.Label):
			ranks[i] = rankLabelled
		case tierOf(d.Agent(i).Labels, p.TierLabel) == p.Tier && p.Tier != "":
			ranks[i] = rankTier + int64(min(max(t.Priority, 0), 3))
		default:
			ranks[i] = rankOther
		}
	}
}

func has(ls policy.Labels, key string) bool {
	_, ok := ls.Get(key)
	return ok
}

func tierOf(ls policy.Labels, key string) string {
	v, _ := ls.Get(key)
	return v
}
