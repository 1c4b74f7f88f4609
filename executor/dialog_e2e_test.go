package executor_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// TestRealChromiumADialogTaskAnswersTheDialogAClickOpened: in a session, a
// click that opens a confirm fails at once, not retried (the dialog holds
// it up: dialog_blocking), and leaves the session's tab and its dialog as
// they are; the session's next task, of kind "dialog", answers it, and the
// page goes on. A click that says "dialogAction" needs no second task.
func TestRealChromiumADialogTaskAnswersTheDialogAClickOpened(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><title>Confirm</title>
<button id="del" onclick="out.textContent = confirm('Delete it?') ? 'deleted' : 'kept'">Delete</button><div id="out"></div>`)
	}))
	t.Cleanup(srv.Close)
	inst := startChromium(t)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	s := &session{key: "dialogs"}
	ctx := context.Background()

	require.NoError(t, s.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+srv.URL+`"}`)).Err)
	tab := s.tab
	o := s.run(ctx, bn.exec, "local", action("click", "#del", ""))
	require.Error(t, o.Err)
	var pe *pinchtab.Error
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, "dialog_blocking", pe.Code, "%v", o.Err)
	require.Contains(t, o.Err.Error(), `confirm: "Delete it?"`)
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err), "retrying the click is held up again")

	o = s.run(ctx, bn.exec, "local", action("dialog", "", `{"action":"accept"}`))
	require.NoError(t, o.Err)
	require.Equal(t, tab, o.TabID, "the dialog was the session tab's")
	var res struct {
		Type, Message string
		Handled       bool
	}
	require.NoError(t, json.Unmarshal(o.Result, &res), "%s", o.Result)
	require.Equal(t, "confirm", res.Type)
	require.Equal(t, "Delete it?", res.Message)
	require.True(t, res.Handled)
	require.Equal(t, "deleted", textOf(t, s.run(ctx, bn.exec, "local", action("text", "#out", ""))))

	o = s.run(ctx, bn.exec, "local", action("click", "#del", `{"dialogAction":"dismiss"}`))
	require.NoError(t, o.Err)
	require.Equal(t, "kept", textOf(t, s.run(ctx, bn.exec, "local", action("text", "#out", ""))))
}
