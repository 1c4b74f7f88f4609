package executor_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// hangingSite serves a page whose button's click handler never yields.
func hangingSite(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><title>Hang</title><button id=go onclick="while(true){}">Go</button>`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRealChromiumAShortTimeoutHearsPageUnresponsive: with an attempt of
// 10 s, short of the instance's cap of 2 minutes, a click whose handler
// never yields, in a session's tab, ends with page_unresponsive within the
// attempt (the built-in Chromium fits its work, its probe and the tab's
// closing in what the attempt has left, and keeps a second of it for the
// answer), not with the attempt's own timeout: the task fails for good,
// and the session is told that its binding went (a SESSION event), never
// moved silently.
func TestRealChromiumAShortTimeoutHearsPageUnresponsive(t *testing.T) {
	t.Parallel()
	url := hangingSite(t)
	inst := startChromiumCapped(t, 2*time.Minute)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	s := &session{key: "short"}
	ctx, cancelRun := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelRun()
	require.NoError(t, s.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`)).Err)

	attemptCtx, cancelAttempt := context.WithTimeout(ctx, 10*time.Second)
	defer cancelAttempt()
	o := s.run(attemptCtx, bn.exec, "local", action("click", "#go", ""))
	var pe *pinchtab.Error
	require.ErrorAs(t, o.Err, &pe, "%v", o.Err)
	require.Equal(t, pinchtab.CodePageUnresponsive, pe.Code, "heard within the attempt: %v", o.Err)
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
	require.ErrorIs(t, o.Err, engine.ErrInstanceGone)
	require.NotContains(t, o.Err.Error(), "instance gone", "the instance is fine")
	require.Equal(t, []string{"agent-e2e/short"}, bn.sink.expiredSessions(), "the session is told its tab went")
}

// TestRealChromiumALateUnresponsiveAnswerLosesTheSessionsTabAloud: when
// page_unresponsive arrives only after the attempt ended (here a proxy
// hides how long the attempt has left, and the abort grace waits for the
// answer), the engine may have decided on a retry already: the session's
// tab is recorded as lost (InstanceSink.TabClosed: a SESSION event, and
// SESSION_LOST for its next task), its binding is not dropped in silence.
func TestRealChromiumALateUnresponsiveAnswerLosesTheSessionsTabAloud(t *testing.T) {
	t.Parallel()
	url := hangingSite(t)
	inst := startChromiumCapped(t, 6*time.Second)
	u, err := neturl.Parse(inst.URL())
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	hider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(pinchtab.HeaderTimeout)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(hider.Close)
	bn := setup(t, executor.Options{AbortGrace: time.Minute}, executor.InstanceConfig{ID: "local", URL: hider.URL, Token: inst.Token()})
	s := &session{key: "late"}
	ctx, cancelRun := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelRun()
	require.NoError(t, s.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`)).Err)
	tab := s.tab

	attemptCtx, cancelAttempt := context.WithTimeout(ctx, time.Second)
	defer cancelAttempt()
	o := s.run(attemptCtx, bn.exec, "local", action("click", "#go", ""))
	require.Error(t, o.Err)
	require.ErrorIs(t, o.Err, context.DeadlineExceeded, "the attempt had ended")
	require.NotErrorIs(t, o.Err, engine.ErrInstanceGone, "the binding stays, marked lost: %v", o.Err)
	require.Equal(t, tab, o.TabID)
	require.Contains(t, o.Err.Error(), "SESSION_LOST")
	require.Contains(t, bn.sink.closedTabs(), tab, "the session lost its tab, and is told")
	for _, k := range bn.sink.unboundSessions() {
		require.False(t, strings.HasSuffix(k, "/late"), "no silent unbinding")
	}
}
