package client_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// sseServer answers every request with one "next" event, then (unless
// hold) the "complete" event and, once released, the end of the response:
// gqlgen's SSE transport flushes "complete" and returns, and the response's
// last chunk follows in a write of its own. It counts the connections it
// accepts and the requests whose context ended (the client went away).
type sseServer struct {
	*httptest.Server
	conns, gone atomic.Int32
	release     chan struct{}
}

func newSSEServer(t *testing.T, hold bool) *sseServer {
	s := &sseServer{release: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ":\n\nevent: next\ndata: {\"data\":{\"n\":1}}\n\n")
		w.(http.Flusher).Flush()
		if hold {
			<-r.Context().Done()
			s.gone.Add(1)
			return
		}
		fmt.Fprint(w, "event: complete\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestACompletedStreamHandsItsConnectionBack: a stream read to its
// "complete" event leaves its connection to the next request, instead of
// closing it and making the next request dial a new one.
func TestACompletedStreamHandsItsConnectionBack(t *testing.T) {
	srv := newSSEServer(t, false)
	c := client.New(srv.URL)
	for range 5 {
		st, err := c.SubscribeSSE(t.Context(), "subscription { n }", nil)
		require.NoError(t, err)
		msg, err := st.Next()
		require.NoError(t, err)
		require.JSONEq(t, `{"n":1}`, string(msg.Data))
		_, err = st.Next()
		require.ErrorIs(t, err, io.EOF)
		srv.release <- struct{}{} // the response ends after "complete" was read
		require.NoError(t, st.Close())
	}
	require.EqualValues(t, 1, srv.conns.Load(), "connections the five streams used")
}

// TestAStreamClosedBeforeItCompletesEndsItsRequest: closing a stream the
// server has not completed stops the subscription (the server's request
// ends), as it always did.
func TestAStreamClosedBeforeItCompletesEndsItsRequest(t *testing.T) {
	srv := newSSEServer(t, true)
	c := client.New(srv.URL)
	st, err := c.SubscribeSSE(t.Context(), "subscription { n }", nil)
	require.NoError(t, err)
	_, err = st.Next()
	require.NoError(t, err)
	require.NoError(t, st.Close())
	waitfor.Eventually(t, "the server's request to end", func() bool { return srv.gone.Load() == 1 })
	_, err = st.Next()
	require.Error(t, err, "a closed stream reads nothing more")
}
