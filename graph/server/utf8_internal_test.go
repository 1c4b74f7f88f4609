package server

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInvalidUTF8IsFoundWithItsPath(t *testing.T) {
	for _, tc := range []struct {
		doc, field string
	}{
		{`{"query":"{ a }","variables":{"in":{"agentId":"ok"}}}`, ""},
		{`{"variables":{"in":{"agentId":"` + "\xff\xfe" + `"}}}`, "variables.in.agentId"},
		{`{"variables":{"in":{"agentId":"\ud800"}}}`, "variables.in.agentId"},
		{`{"variables":{"in":{"agentId":"\uD83D\uDE00 ok"}}}`, ""},
		{`{"variables":{"in":{"agentId":"` + "\uFFFD" + ` written"}}}`, ""},
		{`{"variables":{"in":{"agentId":"\ufffd escaped"}}}`, ""},
		{`{"variables":{"in":{"labels":[{"key":"a"},{"key":"b","value":"` + "\xc3" + `"}]}}}`, "variables.in.labels.1.value"},
		{`{"variables":{"list":["a",1,{"x":[]},"` + "\xff" + `"]}}`, "variables.list.3"},
		{`{"variables":{"` + "\xff" + `":1}}`, "variables.(a key)"},
		{`{"query":"{ a(x: \"` + "\xff" + `\") }"}`, "query"},
		{`"` + "\xff" + `"`, "body"},
		{`{"variables": not json ` + "\xff", ""}, // not JSON: the transport says so
	} {
		field, ok := invalidUTF8InJSON([]byte(tc.doc))
		require.Equal(t, tc.field == "", ok, tc.doc)
		require.Equal(t, tc.field, field, tc.doc)
	}
	field, ok := invalidUTF8InQuery(url.Values{"query": {"{ a }"}, "variables": {`{"in":{"agentId":"` + "\xff" + `"}}`}})
	require.False(t, ok)
	require.Equal(t, "variables.in.agentId", field)
	field, ok = invalidUTF8InQuery(url.Values{"operationName": {"\xff"}})
	require.False(t, ok)
	require.Equal(t, "operationName", field)
}
