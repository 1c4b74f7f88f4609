// Helpers the modes share: following a task to its end over GraphQL, and
// setting a header on every request.

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/client"
)

// followUntilSettled follows a task over the task subscription (Server-Sent
// Events) until it settles, in the engine's sense (engine.State.Settled:
// terminal, or PARKED), and returns that state and when the client had it.
//
// A task that ended ends its subscription too (the server sends "complete"
// right after the terminal state): the stream is read on to that, after
// the time is taken, so that its connection goes back to the pool for the
// next request. Cut short, it was closed, and the next submitTask paid for
// a new connection (a dial and an accept on the path of most rounds).
func followUntilSettled(ctx context.Context, gql *client.Client, id string) (engine.State, time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := gql.SubscribeSSE(ctx, Follow_Operation, map[string]any{"id": id})
	if err != nil {
		return 0, time.Time{}, err
	}
	defer st.Close()
	for {
		msg, err := st.Next()
		if errors.Is(err, io.EOF) {
			return 0, time.Time{}, errors.New("the stream ended before the task")
		}
		if err != nil {
			return 0, time.Time{}, err
		}
		if len(msg.Errors) > 0 {
			return 0, time.Time{}, msg.Errors
		}
		var data FollowResponse
		if err := json.Unmarshal(msg.Data, &data); err != nil {
			return 0, time.Time{}, err
		}
		state, ok := engine.ParseState(string(data.Task.State))
		if !ok {
			return 0, time.Time{}, fmt.Errorf("the task is in an unknown state %q", data.Task.State)
		}
		if state.Settled() {
			at := time.Now()
			if state.Terminal() {
				// Read on to "complete" (bounded: a stream that does not
				// end is cut short, as before).
				stop := time.AfterFunc(time.Second, cancel)
				for err == nil {
					_, err = st.Next()
				}
				stop.Stop()
			}
			return state, at, nil
		}
	}
}

// setHeader sets one header on each request before next sends it.
type setHeader struct {
	name, value string
	next        http.RoundTripper
}

func (h setHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.next.RoundTrip(r)
}
