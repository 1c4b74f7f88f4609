package requestid_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/requestid"
)

func TestOnlySaneIDsAreTaken(t *testing.T) {
	for _, id := range []string{"a", "01J9Z8K3", "client-7f3a:9/b=c", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", strings.Repeat("x", requestid.MaxLen)} {
		require.True(t, requestid.Valid(id), "%q", id)
	}
	for _, id := range []string{"", strings.Repeat("x", requestid.MaxLen+1), "a b", "a\tb", "a\nb", "a\rb", "\x00", "\x7f", "ünï"} {
		require.False(t, requestid.Valid(id), "%q", id)
	}
	require.Nil(t, requestid.Given(http.Header{"X-Request-Id": {"one", "two"}}), "sent twice: neither")
	require.Equal(t, []string{"one"}, requestid.Given(http.Header{"X-Request-Id": {"one"}}))
}

// A request's id is the caller's, or made once, on first use, and the same
// for every goroutine that asks.
func TestAnIDIsMadeOnceWhenAskedFor(t *testing.T) {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.7:51234"
	var q requestid.Request
	q.Init(r)
	require.Equal(t, "10.0.0.7:51234", q.Remote)
	require.Empty(t, q.Known())
	require.Nil(t, q.HeaderValue(), "nothing made until asked for")
	ctx := requestid.With(context.Background(), &q)
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { ids[i] = requestid.ID(ctx) })
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	require.Regexp(t, `^[A-Z2-7]{26}$`, ids[0])
	require.Equal(t, ids[0], requestid.Known(ctx))
	require.Equal(t, []string{ids[0]}, q.HeaderValue())

	r.Header.Set("X-Request-Id", "mine-1")
	var given requestid.Request
	given.Init(r)
	require.Equal(t, "mine-1", given.Known())
	require.Equal(t, "mine-1", given.ID())

	require.Empty(t, requestid.ID(context.Background()), "no request, no id")
	require.Equal(t, "call-9", requestid.ID(requestid.WithID(context.Background(), "call-9")))
	require.NotEqual(t, "bad id", requestid.ID(requestid.WithID(context.Background(), "bad id")))
}
