package model

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/internal/poison"
)

// Under tests, SubmitTasksJSON.Release overwrites the room a batch was
// read into with poison and keeps it out of the pool (internal/poison):
// whatever kept a pointer into the input past Release — the item list,
// an item, a key's pointer (as a payload's SubmitTaskResult.Key does), a
// task, a label — reads poison, never the batch's values nor a zero that
// passes for an omitted field. What was copied out before (string values,
// as the engine copies each spec; the params and dependency lists, which
// are not in the room) stays as it was.
func TestAReadAfterReleaseSeesPoison(t *testing.T) {
	text := []byte(`{"items":[` +
		`{"key":"a","task":{"agentId":"agent-1","lane":"l","instruction":"do","labels":[{"key":"k","value":"v"}]}},` +
		`{"task":{"agentId":"agent-2","action":{"kind":"go","params":{"x":1}},"dependsOn":["a"],"retryPolicy":{"maxAttempts":3}}}]}`)
	v, _, ok := DecodeSubmitTasksJSON(text)
	if !ok {
		t.Fatal("not read typed")
	}
	if v.room == nil {
		t.Fatal("a batch of two is read into pooled room")
	}
	var in SubmitTasksInput // as gqlgen's argument holds it
	if err := in.UnmarshalGQL(v); err != nil {
		t.Fatal(err)
	}
	first, second := in.Items[0], in.Items[1]
	key, lane, label := first.Key, first.Task.Lane, first.Task.Labels[0]
	// Copied out before Release: the engine's copy of a spec.
	agent, instruction := first.Task.AgentID, *first.Task.Instruction
	params, deps := second.Task.Action.Params, second.Task.DependsOn

	v.Release()

	for name, got := range map[string]string{
		"the key through its pointer":     *key,
		"the lane through its pointer":    *lane,
		"a label":                         label.Key + label.Value,
		"the agent through the item":      first.Task.AgentID,
		"the agent through the item list": in.Items[1].Task.AgentID,
		"the action's kind":               second.Task.Action.Kind,
	} {
		if !strings.Contains(got, poison.Text) {
			t.Errorf("%s after Release: %q, want the poison", name, got)
		}
	}
	if first.Task.Priority == nil || *first.Task.Priority == 0 {
		t.Errorf("the priority after Release: not poisoned")
	}
	if agent != "agent-1" || instruction != "do" || string(params) != `{"x":1}` || len(deps) != 1 || deps[0] != "a" {
		t.Errorf("values copied out before Release changed: %q %q %s %q", agent, instruction, params, deps)
	}
	mustPanic(t, "a second Release", v.Release)
}

// A batch too large to pool is poisoned at Release as well, and released
// twice panics: the contract does not depend on the batch's size.
func TestALargeBatchIsPoisonedToo(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := range maxPooledSlots + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"key":"k%d","task":{"agentId":"agent","instruction":"i"}}`, i)
	}
	b.WriteString(`]}`)
	v, _, ok := DecodeSubmitTasksJSON([]byte(b.String()))
	if !ok || v.room != nil {
		t.Fatalf("read typed %v, room %v: want it read without pooled room", ok, v != nil && v.room != nil)
	}
	last := v.in.Items[maxPooledSlots]
	v.Release()
	if !strings.Contains(last.Task.AgentID, poison.Text) || !strings.Contains(*last.Key, poison.Text) {
		t.Fatalf("the last item after Release: %q %q", last.Task.AgentID, *last.Key)
	}
	mustPanic(t, "a second Release", v.Release)
}

// Room given back twice would hand two batches the same slots; under
// tests it panics.
func TestRoomGivenBackTwicePanics(t *testing.T) {
	r := getBatchRoom(3)
	putBatchRoom(r)
	mustPanic(t, "room given back twice", func() { putBatchRoom(r) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	f()
}
