package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/cli"
)

// A request that reached the server but got no answer may have been
// applied: a submission whose --request-timeout ran out while the server
// worked on it, or whose connection broke once it was sent, exits 8 (send
// it again, with the same idempotency key), never 6, which says that
// nothing was sent (a refused connection stays 6).
func TestARequestSentButNotAnsweredMayHaveBeenApplied(t *testing.T) {
	t.Parallel()
	var got atomic.Int32
	done := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		got.Add(1)
		<-done // it works on it for longer than the client waits
	}))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(done) }) // before the server closes
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		got.Add(1)
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = c.Close() // the server dies before it answers
		}
	}))
	t.Cleanup(broken.Close)

	submit := []string{"task", "submit", "--action", "click", "--idempotency-key", "K", "--request-timeout", "2s"}
	res := sw(t, silent.URL, submit...)
	require.Equal(t, cli.ExitRetry, res.code, res.stderr)
	require.Contains(t, res.stderr, "no answer within --request-timeout 2s after the request was sent: it may have been applied; send it again with the same idempotency key")
	require.Equal(t, int32(1), got.Load(), "the server had the submission")

	res = sw(t, broken.URL, submit...)
	require.Equal(t, cli.ExitRetry, res.code, res.stderr)
	require.Contains(t, res.stderr, "the connection broke after the request was sent")
	require.Contains(t, res.stderr, "it may have been applied")
	require.Equal(t, int32(2), got.Load())

	// Nothing sent: a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	res = sw(t, "http://"+addr, submit...)
	require.Equal(t, cli.ExitUnreachable, res.code, res.stderr)
	require.Contains(t, res.stderr, "connection refused")
	require.False(t, strings.Contains(res.stderr, "may have been applied"), res.stderr)
}
