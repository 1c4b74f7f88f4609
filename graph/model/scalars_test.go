package model

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnmarshalJSONWritesWhatTheEncoderWrites: the JSON scalar's fast path
// gives the encoder's bytes, and is taken for the common values.
func TestUnmarshalJSONWritesWhatTheEncoderWrites(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool
	}{
		{`{"url":"https://example.com/a?b=c&d=<e>","n":7,"z":[1,2.5,-3e+2,true,null,{}],"a":{"y":"x","b":[]}}`, true},
		{`{"text":"hello"}`, true},
		{`[]`, true},
		{`"plain"`, true},
		{`0`, true},
		{`-0.5E-7`, true},
		{`{"text":"quote \" and backslash \\"}`, false},
		{`{"text":"tab\there"}`, false},
		{`{"text":"é and \u2028"}`, false},
		{`{"é":1}`, false},
		{`{"b":1,"a":{"d":[{"f":"g","e":null}],"c":false}}`, true},
	} {
		dec := json.NewDecoder(bytes.NewReader([]byte(tc.in)))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v))
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(v))
		want := string(bytes.TrimSpace(buf.Bytes()))
		_, fast := appendPlainJSON(nil, v)
		require.Equal(t, tc.fast, fast, tc.in)
		got, err := UnmarshalJSON(v)
		require.NoError(t, err)
		require.Equal(t, want, string(got), tc.in)
	}
	for _, n := range []string{"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "0x10", "1_0", "Inf"} {
		require.False(t, isJSONNumber(n), n)
		_, fast := appendPlainJSON(nil, json.Number(n))
		require.False(t, fast, n)
	}
	for _, n := range []string{"0", "-0", "10", "1.25", "1e9", "1E-9", "-12.5e+3"} {
		require.True(t, isJSONNumber(n), n)
	}
	got, err := UnmarshalJSON(map[string]any(nil))
	require.NoError(t, err)
	require.Equal(t, "null", string(got))
}
