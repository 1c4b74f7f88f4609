package jsonutf8_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/internal/jsonutf8"
)

func TestCheckExceptPassesOverTheStringsItIsToldToAndFindsTheRest(t *testing.T) {
	args := func(path []string) bool { return len(path) >= 2 && path[0] == "params" && path[1] == "arguments" }
	for _, tc := range []struct {
		doc, path string
		ok        bool
	}{
		{`{"params":{"arguments":{"text":"\ud800"}}}`, "", true},
		{"{\"params\":{\"arguments\":{\"\xff\":[\"\xfe\"]}}}", "", true},
		{`{"params":{"arguments":{"text":"\ud800"},"name":"\udc00"}}`, "params.name", false},
		{`{"params":{"arguments":["\ud800"],"_meta":{"progressToken":"\udc00"}}}`, "params._meta.progressToken", false},
		{"{\"params\":{\"\xff\":\"x\"}}", "params.(a key)", false},
		{`{"method":"\ud800","params":{"arguments":{}}}`, "method", false},
		{`["\ud800"]`, "0", false},
	} {
		path, ok := jsonutf8.CheckExcept([]byte(tc.doc), args)
		require.Equal(t, tc.ok, ok, tc.doc)
		require.Equal(t, tc.path, path, tc.doc)
	}
	path, ok := jsonutf8.Check([]byte(`{"params":{"arguments":{"text":"\ud800"}}}`))
	require.False(t, ok)
	require.Equal(t, "params.arguments.text", path)
}
