package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
)

// FuzzSubmit feeds arbitrary specs to Submit: every one is either admitted
// (a task in a recorded state) or refused with a typed error, and a refusal
// for bad input records nothing. Nothing panics.
func FuzzSubmit(f *testing.F) {
	f.Add("agent", "main", "s1", int8(2), "click", "css:#go", []byte(`{"x":1}`), "", "", int64(0), int64(0), "k", "http://example.com/h", uint8(0))
	f.Add("", "nope", "", int8(9), "", "", []byte(`[1]`), "do it", "01ABC", int64(-5), int64(-1), "", "ftp://x", uint8(1))
	f.Add("a\x00b", "team", "tab", int8(-1), "fill", "", []byte(`null`), "", "", int64(60), int64(1e9), "", "http://[::1", uint8(7))
	f.Fuzz(func(t *testing.T, agent, lane, session string, prio int8, kind, selector string, params []byte,
		instruction, dep string, deadlineS, timeoutMs int64, idem, webhook string, mode uint8) {
		h := enginetest.New(t, &engine.Config{EventBuffer: 64})
		spec := engine.TaskSpec{AgentID: agent, Lane: lane, SessionKey: session, Priority: engine.Priority(prio),
			Instruction: instruction, Timeout: time.Duration(timeoutMs) * time.Millisecond, IdempotencyKey: idem,
			WebhookURL: webhook, QueueMode: engine.QueueMode(mode)}
		if kind != "" || selector != "" || len(params) > 0 {
			spec.Action = &engine.Action{Kind: kind, Selector: selector, Params: json.RawMessage(params)}
		}
		if dep != "" {
			spec.DependsOn = []string{dep}
		}
		if deadlineS != 0 {
			spec.Deadline = h.Clock.Now().Add(time.Duration(deadlineS) * time.Second)
		}
		task, err := h.Engine.Submit(context.Background(), spec)
		if err != nil {
			var ee *engine.Error
			if !errors.As(err, &ee) {
				t.Fatalf("untyped error: %v", err)
			}
			if ee.Code == engine.CodeInvalidInput && (task != nil || h.Stats(context.Background()).Submitted != 0) {
				t.Fatalf("invalid input was recorded: %v", err)
			}
			return
		}
		if task == nil || task.State == 0 {
			t.Fatalf("admitted without a recorded state: %+v", task)
		}
		if _, err := h.Engine.Cancel(context.Background(), task.ID, "fuzz"); err != nil && !engine.IsCode(err, engine.CodeConflict) {
			t.Fatalf("cancel: %v", err)
		}
	})
}
