package executor_test

// Adversarial answers at the instance boundary: an instance that hangs,
// trickles, answers garbage, resets the connection or floods. Each attempt
// must end in bounded time with an error that says what the instance did,
// and through the engine no task may be lost.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// hostility is how an instance misbehaves on actions.
type hostility string

const (
	hang      hostility = "hang"      // never answers
	trickle   hostility = "trickle"   // 200 and a body one byte at a time, for ever
	garbage5  hostility = "garbage5"  // 500 with an HTML page for a body
	reset     hostility = "reset"     // closes the connection mid-answer
	flood     hostility = "flood"     // an error body far larger than anyone reads
	wrongJSON hostility = "wrongJSON" // 400 whose JSON body has fields of the wrong types
)

// newHostile is a fake instance whose health checks, tab list and tab
// opening behave, and whose actions misbehave as h says.
func newHostile(t *testing.T, h hostility) *httptest.Server {
	f := newFakeInstance(t, "h", "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/action") {
			f.serve(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		switch h {
		case hang:
			<-r.Context().Done()
		case trickle:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"success":`)
			for r.Context().Err() == nil {
				_, _ = io.WriteString(w, " ")
				w.(http.Flusher).Flush()
				time.Sleep(10 * time.Millisecond)
			}
		case garbage5:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "<html><body><h1>Oops</h1>\x00\xff</body></html>")
		case reset:
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"succ")
				_ = buf.Flush()
				_ = conn.Close()
			}
		case flood:
			w.WriteHeader(http.StatusBadRequest)
			chunk := strings.Repeat("x", 64<<10)
			for i := 0; i < 256 && r.Context().Err() == nil; i++ { // 16 MiB
				_, _ = io.WriteString(w, chunk)
			}
		case wrongJSON:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":42,"code":["x"],"retryable":"yes"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHostileInstancesEndEachAttemptInBoundedTimeWithAClearError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		h       hostility
		says    string // the error names what the instance did
		class   policy.ErrorClass
		fault   bool // an instance fault: the task's budget is spared
		timeout bool // ended by the attempt's deadline
	}{
		{h: hang, says: "deadline exceeded", class: policy.ClassTransient, timeout: true},
		{h: trickle, says: "deadline exceeded", class: policy.ClassTransient, timeout: true},
		{h: garbage5, says: "500 Internal Server Error", class: policy.ClassTransient},
		{h: reset, says: "unexpected EOF", class: policy.ClassTransient, fault: true},
		{h: flood, says: "400 Bad Request", class: policy.ClassPermanent},
		{h: wrongJSON, says: "400 Bad Request", class: policy.ClassPermanent},
	} {
		t.Run(string(tc.h), func(t *testing.T) {
			t.Parallel()
			srv := newHostile(t, tc.h)
			bn := setup(t, executor.Options{AbortGrace: 100 * time.Millisecond},
				executor.InstanceConfig{ID: "h", URL: srv.URL, Kind: executor.KindInstance})
			const deadline = 500 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			o := bn.exec.Execute(ctx, &attempt{id: "t", instance: "h", spec: &engine.TaskSpec{AgentID: "x",
				Action: action("click", "#go", "")}})
			took := time.Since(start)
			require.Error(t, o.Err)
			// Bounded: the deadline, then at most the abort grace and the
			// cost of closing the connection; 10 s is a bound a busy
			// machine keeps, not a speed goal.
			require.Less(t, took, 10*time.Second, "the attempt ended")
			require.ErrorContains(t, o.Err, tc.says)
			require.Equal(t, tc.class, engine.ClassOf(o.Err), "%v", o.Err)
			require.Equal(t, tc.fault, errorsIs(o.Err, engine.ErrInstanceFault), "%v", o.Err)
			require.NotContains(t, o.Err.Error(), strings.Repeat("x", 64<<10), "a flood is not copied into the error")
			require.Less(t, len(o.Err.Error()), 4096, "the error stays readable")
			if !tc.timeout {
				require.Less(t, took, deadline, "an answer, however bad, ends the attempt before its deadline")
			}
		})
	}
}

// TestNothingIsLostBehindAHostileInstance sends tasks through the engine to
// instances that misbehave every way at once: each task ends, with its
// attempts and an error that says why.
func TestNothingIsLostBehindAHostileInstance(t *testing.T) {
	t.Parallel()
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: 20 * time.Millisecond})
	t.Cleanup(reg.Close)
	exec, err := executor.New(executor.Options{Registry: reg, AbortGrace: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Close() })
	eng, err := engine.New(engine.Options{Store: memory.New(memory.Options{}), Executor: exec, Clock: clock.Real{}, TabLocator: reg,
		Config: engine.Config{InstanceFaultDelay: 10 * time.Millisecond, InstanceFaultBudget: 2,
			// The lane's timeout is one a busy machine keeps: a bad answer
			// ends its attempt on its own. Only the instances that never
			// answer (hang, trickle) are ended by a timeout, their tasks'.
			Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 64, Timeout: time.Minute,
				Retry: engine.RetryPolicy{MaxAttempts: 2, Backoff: time.Millisecond, Multiplier: 1}, Exhausted: engine.ExhaustedFail}}}})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	t.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	reg.SetSink(eng)
	ctx := context.Background()
	hs := []hostility{hang, trickle, garbage5, reset, flood, wrongJSON}
	var ids []string
	for i, h := range hs {
		id := fmt.Sprintf("h%d", i)
		_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: id, URL: newHostile(t, h).URL, Kind: executor.KindInstance})
		require.NoError(t, err)
		var timeout time.Duration
		if h == hang || h == trickle {
			timeout = 300 * time.Millisecond
		}
		for range 3 {
			task, err := eng.Submit(ctx, engine.TaskSpec{AgentID: "x", InstanceID: id, Timeout: timeout, Action: action("click", "#go", "")})
			require.NoError(t, err)
			ids = append(ids, task.ID)
		}
	}
	waitfor.CheckFor(t, func() error {
		for _, id := range ids {
			got, err := eng.Task(ctx, id)
			if err != nil {
				return err
			}
			if !got.State.Terminal() {
				inst, _ := reg.Get(context.Background(), got.Spec.InstanceID)
				return fmt.Errorf("%s on %s (%s %s) is %s (%s), %d attempts", id, got.Spec.InstanceID, inst.Health, inst.LastError, got.State, got.Reason, len(got.Attempts))
			}
		}
		return nil
	})
	for _, id := range ids {
		got, err := eng.Task(ctx, id)
		require.NoError(t, err)
		require.Equal(t, engine.StateFailed, got.State, "%s: %s", id, got.Reason)
		require.NotEmpty(t, got.Attempts)
		require.NotEmpty(t, got.Error, "the task says why")
		says := map[string]string{"h0": "timed out", "h1": "timed out", "h2": "500 Internal Server Error", "h3": "unexpected EOF",
			"h4": "400 Bad Request", "h5": "400 Bad Request"}[got.Spec.InstanceID]
		require.Contains(t, got.Error, says, "%s on %s", id, got.Spec.InstanceID)
		for _, a := range got.Attempts {
			require.False(t, a.EndedAt.IsZero(), "every attempt ended")
			require.NotEmpty(t, a.Error)
		}
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
