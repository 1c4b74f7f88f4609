package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStringsThatAreNotUTF8AreNotSent(t *testing.T) {
	type item struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	for field, vars := range map[string]map[string]any{
		"variables.in.agentId":        {"in": map[string]any{"agentId": "a\xffb"}},
		"variables.in.labels.1.value": {"in": map[string]any{"labels": []item{{"k", "v"}, {"k2", "\xfe"}}}},
		"variables.ids.0":             {"ids": []string{"\xc3"}},
		"variables.(a key)":           {"\xff": 1},
	} {
		err := checkUTF8("query { x }", vars)
		require.EqualError(t, err, field+": not valid UTF-8 (strings must be UTF-8; invalid bytes are not sent)")
	}
	require.NoError(t, checkUTF8("query { x }", map[string]any{"in": map[string]any{"agentId": "a\uFFFDb", "n": 3, "b": []byte{0xff}}}))
	require.EqualError(t, checkUTF8("{ \xff }", nil), "query: not valid UTF-8")

	// Nothing reaches the network: the URL is never dialled.
	c := New("http://127.0.0.1:1/graphql")
	_, _, err := c.Raw(context.Background(), Request{Query: "{ x }", Variables: map[string]any{"a": "\xff"}})
	require.ErrorContains(t, err, "variables.a: not valid UTF-8")
}
