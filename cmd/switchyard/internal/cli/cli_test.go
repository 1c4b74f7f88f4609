package cli

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
)

func TestProgressBarDrawsOnATerminalOnly(t *testing.T) {
	t.Parallel()
	var w bytes.Buffer
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := start.Add(time.Second) // a fixed clock: the rate does not depend on the machine's load
	p := &progress{w: &w, on: true, total: 200, start: start, now: func() time.Time { return now }}
	p.update(50, 1)
	require.Contains(t, w.String(), "\r[#######-----------------------] 50/200  25%")
	require.Contains(t, w.String(), "1 refused")
	p.clear()
	require.True(t, strings.HasSuffix(w.String(), "\r\033[K"), "clear erases the line for a message")
	p.finish(200, 1)
	require.True(t, strings.HasSuffix(w.String(), "200/200 100%  200 tasks/s  1 refused \n"), "%q", w.String())

	w.Reset()
	off := &progress{w: &w, on: false, total: 10, start: time.Now()}
	off.update(5, 0)
	off.clear()
	off.finish(10, 0)
	require.Empty(t, w.String(), "no bar when stderr is not a terminal")
}

func TestEndpointAddsGraphQLToABareServer(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":             "http://127.0.0.1:8080/graphql",
		"127.0.0.1:8080":                    "http://127.0.0.1:8080/graphql",
		"https://yard.example.test/":        "https://yard.example.test/graphql",
		"https://yard.example.test/api/gql": "https://yard.example.test/api/gql",
	} {
		got, err := Endpoint(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := Endpoint("ftp://x")
	require.Equal(t, ExitUsage, ExitCode(err))
}

func TestExitCodesFollowTheErrorCode(t *testing.T) {
	t.Parallel()
	gql := func(code string, ext ...any) error {
		e := &client.Error{Message: "m", Extensions: map[string]any{"code": code}}
		if len(ext) == 2 {
			e.Extensions[ext[0].(string)] = ext[1]
		}
		return fmt.Errorf("verb: %w", client.Errors{e})
	}
	for err, want := range map[error]int{
		gql("NOT_FOUND"):                                   ExitNotFound,
		gql("CONFLICT"):                                    ExitConflict,
		gql("UNAUTHENTICATED"):                             ExitAuth,
		gql("FORBIDDEN"):                                   ExitAuth,
		gql("QUEUE_FULL"):                                  ExitRetry,
		gql("DRAINING"):                                    ExitRetry,
		gql("INTERNAL", "retryable", true):                 ExitRetry,
		gql("INVALID_INPUT"):                               ExitAPI,
		&client.StatusError{Status: 401}:                   ExitAuth,
		&client.StatusError{Status: 502}:                   ExitUnreachable,
		&url.Error{Op: "Post", Err: errors.New("refused")}: ExitUnreachable,
		Usagef("bad"):                                      ExitUsage,
	} {
		require.Equal(t, want, ExitCode(err), "%v", err)
	}
}

func TestEventLinesSayWhatHappened(t *testing.T) {
	t.Parallel()
	e := &Event{Seq: 42, Kind: "STATE", At: "2026-03-02T09:00:00.123Z", TaskID: "T1", AgentID: "a", Lane: "main", From: "RUNNING", To: "RETRY_WAIT", Attempt: 2, Reason: "retry in 2s"}
	line := formatEvent(e, false)
	require.Regexp(t, `^    42 \d\d:\d\d:00\.123 STATE    T1  RUNNING → RETRY_WAIT  agent=a lane=main attempt=2  retry in 2s$`, line)
	require.Contains(t, formatEvent(e, true), "\033[33mRETRY_WAIT\033[0m")
	lagged := formatEvent(&Event{Seq: 90, Kind: "LAGGED", Skipped: 17, Reason: "behind"}, false)
	require.Contains(t, lagged, "missed 17 events: behind")
	batch := formatEvent(&Event{Seq: 91, Kind: "BATCH", BatchID: "B1", Reason: "all ended"}, false)
	require.Contains(t, batch, "batch=B1  all ended")
	session := formatEvent(&Event{Seq: 92, Kind: "SESSION", SessionKey: "checkout", Reason: "lost its tab"}, false)
	require.Contains(t, session, "SESSION  session=checkout  lost its tab")
}

func TestFilesThatAreNotUTF8AreRefused(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"agent":"a`+"\xff"+`"}`), 0o600))
	_, err := readConfig("@" + bad)
	require.EqualError(t, err, "--config: not valid UTF-8 at byte 11 (strings must be UTF-8)")
	require.Equal(t, ExitUsage, ExitCode(err))
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"agent":"a\ufffd"}`), 0o600))
	v, err := readConfig("@" + good)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"agent": "a\uFFFD"}, v)
}
