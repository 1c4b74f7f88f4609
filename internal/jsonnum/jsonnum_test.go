package jsonnum_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/jsonnum"
)

// End takes exactly the numbers encoding/json takes, and stops where the
// number stops.
func TestEndReadsJSONNumbers(t *testing.T) {
	for _, s := range []string{"0", "-0", "7", "-12", "1.5", "0.25", "1e9", "1E+9", "2.5e-3", "-0.0e0", "123456789012345678901234567890"} {
		end, ok := jsonnum.End([]byte(s+",}"), 0)
		require.True(t, ok, s)
		require.Equal(t, len(s), end, s)
		require.True(t, json.Valid([]byte(s)), s)
	}
	for _, s := range []string{"", "-", "+1", ".5", "1.", "1e", "1e+", "-a", "x"} {
		_, ok := jsonnum.End([]byte(s), 0)
		require.False(t, ok, s)
		require.False(t, json.Valid([]byte(s)), s)
	}
	// A leading zero ends the integer part: "01" is the number 0, then "1".
	end, ok := jsonnum.End([]byte("01"), 0)
	require.True(t, ok)
	require.Equal(t, 1, end)
	// It starts where it is told.
	end, ok = jsonnum.End([]byte(`{"a":-3.5}`), 5)
	require.True(t, ok)
	require.Equal(t, 9, end)
}

func FuzzEndAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{"0", "-1.5e3", "01", "1.", "--1", "1e+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		end, ok := jsonnum.End([]byte(s), 0)
		if ok && end == len(s) {
			require.True(t, json.Valid([]byte(s)), "%q read as a whole number", s)
		}
		if json.Valid([]byte(s)) && len(s) > 0 && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') && strings.TrimRight(s, " \t\r\n") == s {
			require.True(t, ok && end == len(s), "%q is a JSON number", s)
		}
	})
}
