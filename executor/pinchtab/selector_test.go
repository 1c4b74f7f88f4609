package pinchtab_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/pinchtab"
	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
)

func TestSelectorsParseAndValidateByTheTable(t *testing.T) {
	for _, tc := range pinchtabtest.SelectorCases {
		s, err := pinchtab.ParseSelector(tc.Selector)
		if tc.Kind == "" {
			var se *pinchtab.SelectorError
			require.ErrorAs(t, err, &se, "%q", tc.Selector)
			require.Equal(t, tc.Selector, se.Selector)
			require.Contains(t, err.Error(), "nothing after the")
			continue
		}
		require.NoError(t, err, "%q", tc.Selector)
		require.Equal(t, pinchtab.Selector{Kind: tc.Kind, Value: tc.Value}, s, "%q", tc.Selector)

		v, err := pinchtab.ValidateSelector(tc.Selector)
		if !tc.Valid {
			var se *pinchtab.SelectorError
			require.ErrorAs(t, err, &se, "%q", tc.Selector)
			require.Contains(t, err.Error(), "is not a valid selector")
			continue
		}
		require.NoError(t, err, "%q", tc.Selector)
		require.Equal(t, s, v)
	}
}
