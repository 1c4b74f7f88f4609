package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// An answer the leader sends a follower carries a store error in general
// terms: the follower's client learns what failed, not where the database is.
func TestAnswersToFollowersTellStoreErrorsInGeneralTerms(t *testing.T) {
	store := storeerr.Mark(fmt.Errorf("postgres store: postgres://sy@db.internal:5432/prod (schema \"s\"): commit: %w", syscall.ECONNREFUSED))
	roundTrip := func(err error) error {
		raw, jerr := json.Marshal(encodeError(err))
		require.NoError(t, jerr)
		require.NotContains(t, string(raw), "db.internal")
		var w wireError
		require.NoError(t, json.Unmarshal(raw, &w))
		return w.decode()
	}

	got := roundTrip(&engine.Error{Code: engine.CodeUnavailable, Retryable: true, Message: "recent changes were not committed", Err: store})
	var ee *engine.Error
	require.True(t, errors.As(got, &ee))
	require.Equal(t, engine.CodeUnavailable, ee.Code)
	require.True(t, ee.Retryable)
	require.Equal(t, "recent changes were not committed: the database cannot be reached (connection refused)", storeerr.Public(ee))
	// A store error still, whose detail the leader logged: the follower
	// answers it with the request's id, and logs where the full error is.
	require.True(t, storeerr.IsStore(ee))
	require.Equal(t, "recent changes were not committed: the database cannot be reached (connection refused) (the leader logged the full error)", ee.Error())

	got = roundTrip(fmt.Errorf("reading the nodes: %w", store))
	require.Equal(t, "reading the nodes: the database cannot be reached (connection refused)", storeerr.Public(got))
	require.True(t, storeerr.IsStore(got))

	got = roundTrip(fmt.Errorf("no such instance: %w", executor.ErrUnknownInstance))
	require.ErrorIs(t, got, executor.ErrUnknownInstance, "a sentinel crosses too")
	require.False(t, storeerr.IsStore(got))
	require.Equal(t, "no such instance: unknown instance", got.Error())

	invalid := &engine.Error{Code: engine.CodeInvalidInput, Field: "lane", Message: `unknown lane "x"`}
	require.Equal(t, invalid.Error(), roundTrip(invalid).Error())
}

// A command's payload carries the request id beside the operation's
// arguments, which decode as before.
func TestACommandCarriesItsRequestID(t *testing.T) {
	carries(t, none{})
	carries(t, idArgs{ID: "t-1"})
	carries(t, cancelArgs{ID: "t-2", Reason: "stop"})
	require.Empty(t, requestIDOf(json.RawMessage(`{"switchyard.requestId":"has space"}`)), "an id that is not sane is none")
}

func carries[A any](t *testing.T, args A) {
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	with := withRequestID(raw, "req-1")
	require.True(t, json.Valid(with), "%s", with)
	require.Equal(t, "req-1", requestIDOf(with))
	var back A
	require.NoError(t, json.Unmarshal(with, &back))
	require.Equal(t, args, back)
	require.Equal(t, string(raw), string(withRequestID(raw, "")), "no id: the payload as it was")
	require.Empty(t, requestIDOf(raw))
}
