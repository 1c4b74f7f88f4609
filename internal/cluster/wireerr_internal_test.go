package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
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
	require.Equal(t, "recent changes were not committed: the database cannot be reached (connection refused)", ee.Error())

	got = roundTrip(fmt.Errorf("reading the nodes: %w", store))
	require.Equal(t, "reading the nodes: the database cannot be reached (connection refused)", got.Error())

	invalid := &engine.Error{Code: engine.CodeInvalidInput, Field: "lane", Message: `unknown lane "x"`}
	require.Equal(t, invalid.Error(), roundTrip(invalid).Error())
}
