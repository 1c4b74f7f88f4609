package mcp_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
	"github.com/switchyard/switchyard/graph/mcp"
)

// The check before submission accepts exactly the selectors the shared
// table calls valid; "" is no selector.
func TestSelectorsAreCheckedByTheSharedTable(t *testing.T) {
	for _, tc := range pinchtabtest.SelectorCases {
		err := mcp.CheckSelector("action.selector", tc.Selector)
		if tc.Valid || tc.Selector == "" {
			require.NoError(t, err, "%q", tc.Selector)
			continue
		}
		var ee *engine.Error
		require.True(t, errors.As(err, &ee), "%q: %v", tc.Selector, err)
		require.Equal(t, engine.CodeInvalidInput, ee.Code, "%q", tc.Selector)
		require.Equal(t, "action.selector", ee.Field, "%q", tc.Selector)
		require.Contains(t, ee.Message, "is not a valid selector", "%q", tc.Selector)
		require.Contains(t, ee.Message, `"e12"`, "the message shows the syntax")
	}
}
