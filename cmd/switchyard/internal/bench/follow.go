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

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/client"
)

// followUntilSettled follows a task over the task subscription (Server-Sent
// Events) until it settles, in the engine's sense (engine.State.Settled:
// terminal, or PARKED), and returns that state.
func followUntilSettled(ctx context.Context, gql *client.Client, id string) (engine.State, error) {
	st, err := gql.SubscribeSSE(ctx, Follow_Operation, map[string]any{"id": id})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	for {
		msg, err := st.Next()
		if errors.Is(err, io.EOF) {
			return 0, errors.New("the stream ended before the task")
		}
		if err != nil {
			return 0, err
		}
		if len(msg.Errors) > 0 {
			return 0, msg.Errors
		}
		var data FollowResponse
		if err := json.Unmarshal(msg.Data, &data); err != nil {
			return 0, err
		}
		state, ok := engine.ParseState(string(data.Task.State))
		if !ok {
			return 0, fmt.Errorf("the task is in an unknown state %q", data.Task.State)
		}
		if state.Settled() {
			return state, nil
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
