package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// `task get` shows how an attempt's time split (tabTimeMs, actionTimeMs)
// and whether it was an instance fault, as GraphQL and the dashboard do:
// in its attempts table and in --json.
func TestTaskGetShowsAnAttemptsTimingsAndInstanceFault(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	end := at.Add(4 * time.Millisecond)
	tab, action := 0.010697, 3.775179
	task := &TaskInfo{Id: "T1", State: "RETRY_WAIT", Attempts: []Attempt{
		{N: 1, AssignedAt: at, StartedAt: &at, EndedAt: &end, TabTimeMs: &tab, ActionTimeMs: &action, ErrorClass: "TRANSIENT", InstanceFault: true},
		{N: 2, AssignedAt: at, ErrorClass: "NONE"},
	}}

	var out bytes.Buffer
	printTask(&out, task)
	require.Regexp(t, `(?m)^#\s+INSTANCE\s+TAB\s+ASSIGNED\s+TAB TIME\s+ACTION\s+RAN\s+CLASS\s+HTTP\s+CODE\s+FAULT\s+ERROR$`, out.String())
	require.Regexp(t, `(?m)^1\s+\d\d:\d\d:\d\d\.000\s+11µs\s+3\.775ms\s+4ms\s+TRANSIENT\s+instance\s*$`, out.String())
	require.Regexp(t, `(?m)^2\s+\d\d:\d\d:\d\d\.000\s+running\s+NONE\s*$`, out.String(), "no timings and no fault: empty cells")

	out.Reset()
	require.NoError(t, writeJSON(&out, task))
	var got struct{ Attempts []map[string]any }
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Len(t, got.Attempts, 2)
	require.Equal(t, tab, got.Attempts[0]["tabTimeMs"])
	require.Equal(t, action, got.Attempts[0]["actionTimeMs"])
	require.Equal(t, true, got.Attempts[0]["instanceFault"])
	require.Contains(t, got.Attempts[1], "tabTimeMs", "a missing timing is null, not left out")
	require.Nil(t, got.Attempts[1]["tabTimeMs"])
	require.Equal(t, false, got.Attempts[1]["instanceFault"])
}

// `task list` shows a held task's hold as its reason, as `task get` does:
// a QUEUED task that reads only "admitted" hides why it does not go.
func TestTaskListShowsAHoldAsTheReason(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	admitted := "admitted"
	tasks := []TaskInfo{
		{Id: "T1", State: "QUEUED", AgentId: "alice", Lane: "main", Priority: PriorityNormal, SubmittedAt: at, Reason: &admitted,
			Hold: &TaskHold{Policy: "ratecap", Lane: "main", Since: at, Reason: "held by fairness plugin ratecap on lane main (asks again at 2026-03-02T09:00:01.000Z)"}},
		{Id: "T2", State: "QUEUED", AgentId: "bob", Lane: "main", Priority: PriorityNormal, SubmittedAt: at, Reason: &admitted},
	}
	var out bytes.Buffer
	require.NoError(t, printTaskList(&out, tasks, at.Add(time.Second)))
	require.Regexp(t, `(?m)^T1\s+QUEUED\s+alice\s+main\s+NORMAL\s+0\s+1s ago\s+held by fairness plugin ratecap on lane main \(asks again at…$`, out.String())
	require.Regexp(t, `(?m)^T2\s+QUEUED\s+bob\s+main\s+NORMAL\s+0\s+1s ago\s+admitted$`, out.String(), "a task that no hold keeps keeps its reason")
}

// An EXPIRED task's error is its reason, and has no class: `task get`
// shows the reason once, without "error (NONE)".
func TestTaskGetShowsAnExpiredTasksReasonWithoutAnErrorClass(t *testing.T) {
	t.Parallel()
	why := "deadline exceeded while queued"
	var out bytes.Buffer
	printTask(&out, &TaskInfo{Id: "T1", State: "EXPIRED", Reason: &why, Error: &why, ErrorClass: "NONE"})
	require.Regexp(t, `(?m)^reason:\s+deadline exceeded while queued$`, out.String())
	require.NotContains(t, out.String(), "error")
	require.Equal(t, 1, strings.Count(out.String(), why), out.String())

	// An error of no class that says more than the reason is shown, without
	// a class; one with a class keeps it.
	other := "instance gone"
	out.Reset()
	printTask(&out, &TaskInfo{Id: "T2", State: "CANCELLED", Reason: &why, Error: &other, ErrorClass: "NONE"})
	require.Contains(t, out.String(), "\nerror: instance gone\n")
	out.Reset()
	printTask(&out, &TaskInfo{Id: "T3", State: "FAILED", Reason: &why, Error: &other, ErrorClass: "PERMANENT"})
	require.Contains(t, out.String(), "\nerror (PERMANENT): instance gone\n")
}

// A task whose result is an artifact (a screenshot, or an answer too large
// to keep inline): `task get` says where to fetch it, and `task get
// --artifact FILE` fetches it from /artifacts/{id} beside the GraphQL
// endpoint, with the same token.
func TestTaskGetFetchesTheArtifactItsResultRefersTo(t *testing.T) {
	t.Parallel()
	const body = `{"count":10000,"truncated":true,"totalNodes":50000,"nodes":[]}`
	srv := artifactServer(t, "s3cret", `{"id":"A1","contentType":"application/json","size":568191,"sha256":"ab"},"kind":"result"`,
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		})
	env := func(out *bytes.Buffer) Env {
		return Env{Stdout: out, Stderr: io.Discard, Getenv: func(k string) string {
			if k == "SWITCHYARD_TOKEN" {
				return "s3cret"
			}
			return ""
		}}
	}

	var out bytes.Buffer
	require.NoError(t, Task(context.Background(), []string{"get", "T1", "--server", srv.URL}, env(&out)))
	require.Contains(t, out.String(), "task get T1 --artifact FILE")
	require.Contains(t, out.String(), srv.URL+"/artifacts/A1")

	file := filepath.Join(t.TempDir(), "result.json")
	out.Reset()
	require.NoError(t, Task(context.Background(), []string{"get", "T1", "--artifact", file, "--server", srv.URL}, env(&out)))
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, body, string(got))

	out.Reset()
	require.NoError(t, Task(context.Background(), []string{"get", "T1", "--artifact", "-", "--server", srv.URL + "/graphql"}, env(&out)))
	require.Equal(t, body, out.String())
}

// A download that fails midway leaves no file behind, and a file already
// at the destination as it was: the artifact is written to a temporary
// file beside it and renamed once complete.
func TestTaskGetArtifactIsWrittenWholeOrNotAtAll(t *testing.T) {
	t.Parallel()
	srv := artifactServer(t, "", `{"id":"A1","contentType":"image/png","size":1000,"sha256":"ab"},"kind":"screenshot"`,
		func(w http.ResponseWriter, r *http.Request) {
			// Half the promised bytes, then the connection drops.
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, strings.Repeat("x", 500))
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		})
	env := Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}

	dir := t.TempDir()
	file := filepath.Join(dir, "shot.png")
	require.Error(t, Task(context.Background(), []string{"get", "T1", "--artifact", file, "--server", srv.URL}, env))
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "a failed download leaves nothing behind")

	require.NoError(t, os.WriteFile(file, []byte("before"), 0o644))
	require.Error(t, Task(context.Background(), []string{"get", "T1", "--artifact", file, "--server", srv.URL}, env))
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "before", string(got), "a failed download leaves the file there as it was")
	left, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, left, 1)
}

// --artifact writes the artifact's bytes as they are: with --json it is a
// usage error, before any request.
func TestTaskGetArtifactRefusesJSON(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	env := Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
	for _, args := range [][]string{
		{"get", "T1", "--artifact", "-", "--json", "--server", "http://127.0.0.1:1"},
		{"get", "T1", "--json", "--artifact", "out.png", "--server", "http://127.0.0.1:1"},
	} {
		err := Task(context.Background(), args, env)
		require.Equal(t, ExitUsage, ExitCode(err), "%v: %v", args, err)
		require.ErrorContains(t, err, "--artifact")
		require.ErrorContains(t, err, "--json")
	}
}

// A file the CLI cannot write is a local error (exit 1), not an
// unreachable server.
func TestTaskGetArtifactToAnUnwritablePlaceIsALocalError(t *testing.T) {
	t.Parallel()
	srv := artifactServer(t, "", `{"id":"A1","contentType":"image/png","size":3,"sha256":"ab"},"kind":"screenshot"`,
		func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "png") })
	env := Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	file := filepath.Join(t.TempDir(), "no-such-dir", "shot.png")
	err := Task(context.Background(), []string{"get", "T1", "--artifact", file, "--server", srv.URL}, env)
	require.ErrorContains(t, err, "no-such-dir")
	require.Equal(t, ExitAPI, ExitCode(err), "a file that cannot be written is not an unreachable server: %v", err)
}

// artifactServer is a server whose task T1's result refers to artifact A1
// (artifact: the result's fields after "artifact":), served by serve; with
// a token, it answers only requests that carry it.
func artifactServer(t *testing.T, token, artifact string, serve http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/graphql":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"data":{"task":{"id":"T1","state":"SUCCEEDED","agentId":"a","lane":"main","priority":"NORMAL","submittedAt":"2026-03-02T09:00:00Z","attemptCount":1,"attempts":[],"dependsOn":[],"labels":[],"errorClass":"NONE",`+
				`"result":{"artifact":`+artifact+`}}}}`)
		case "/artifacts/A1":
			serve(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The CLI prints JSON for terminals and scripts, not for HTML: <, > and &
// as they are, in --json output, in a result task get pretty-prints, and
// in the events watch --json passes on from the server's feed (which
// escapes them), every other escape kept.
func TestJSONOutputKeepsHTMLCharactersAsTheyAre(t *testing.T) {
	t.Parallel()
	reason := "r=>setTimeout(() => a < b && c)"
	task := &TaskInfo{Id: "T1", State: "SUCCEEDED", Reason: &reason, Result: json.RawMessage(`{"html":"<b>x</b> & y"}`)}
	var out bytes.Buffer
	require.NoError(t, writeJSON(&out, task))
	require.Contains(t, out.String(), `"reason":"r=>setTimeout(() => a < b && c)"`)
	require.Contains(t, out.String(), `"result":{"html":"<b>x</b> & y"}`)
	require.True(t, strings.HasSuffix(out.String(), "}\n"))
	require.True(t, json.Valid(out.Bytes()))

	out.Reset()
	printTask(&out, task)
	require.Contains(t, out.String(), `"html": "<b>x</b> & y"`)

	// Raw JSON fields (params, result) come as the server encodes them,
	// escaped for HTML: printed, they read as they are.
	served := &TaskInfo{Id: "T2", State: "SUCCEEDED", Result: json.RawMessage(`{"html":"\u003cb\u003e \u0026 \\u003c"}`)}
	served.Action = &Action{Kind: "evaluate", Params: json.RawMessage(`{"expression":"a \u003c b"}`)}
	out.Reset()
	require.NoError(t, writeJSON(&out, served))
	require.Contains(t, out.String(), `"result":{"html":"<b> & \\u003c"}`)
	require.Contains(t, out.String(), `"params":{"expression":"a < b"}`)
	out.Reset()
	printTask(&out, served)
	require.Contains(t, out.String(), `evaluate {"expression":"a < b"}`)
	require.Contains(t, out.String(), `"html": "<b> & \\u003c"`)

	feed := []byte(`{"reason":"\u003cb\u003e \u0026 \\u003c \u00e9 \"\u003E"}`)
	got := unescapeHTML(feed)
	require.Equal(t, `{"reason":"<b> & \\u003c \u00e9 \">"}`, string(got))
	var a, b map[string]string
	require.NoError(t, json.Unmarshal(feed, &a))
	require.NoError(t, json.Unmarshal(got, &b))
	require.Equal(t, a, b, "the same document")
}
