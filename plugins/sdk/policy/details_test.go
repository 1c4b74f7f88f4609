package policy

import (
	"maps"
	"testing"
)

func TestLabelsRoundTrip(t *testing.T) {
	m := map[string]string{"kind": "search", "tier": "gold", "empty": ""}
	ls := MakeLabels(m)
	if got := ls.Map(); !maps.Equal(got, m) {
		t.Fatalf("Map = %v, want %v", got, m)
	}
	if v, ok := ls.Get("tier"); !ok || v != "gold" {
		t.Fatalf("Get(tier) = %q, %v", v, ok)
	}
	if _, ok := ls.Get("nope"); ok {
		t.Fatal("Get(nope) found a label")
	}
	var keys []string
	for k := range ls.All() {
		keys = append(keys, k)
	}
	if len(keys) != 3 || keys[0] != "empty" || keys[1] != "kind" || keys[2] != "tier" {
		t.Fatalf("keys %v are not sorted", keys)
	}
	if MakeLabels(nil) != "" || Labels("").Len() != 0 {
		t.Fatal("no labels is the empty string")
	}
	if n := Labels("\x05\x00\x00\x00\x00\x00\x00\x00ab").Len(); n != 0 {
		t.Fatalf("a truncated entry yields %d labels", n)
	}
}
