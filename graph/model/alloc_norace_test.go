//go:build !race

// The race detector drops a sync.Pool's items at random: allocation counts
// that rest on a pool are checked without it.

package model

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/internal/poison"
)

// A batch read typed allocates per batch, not per item: its items' room
// comes from the pool, their strings go into shared chunks of text, and
// what is left is the input, the params' buffer and the list of their
// places, and a chunk of text for every textChunk bytes of strings.
func TestABatchReadTypedAllocatesPerBatch(t *testing.T) {
	t.Cleanup(poison.Set(false)) // the pool's reuse is what is counted
	var text strings.Builder
	text.WriteString(`{"items":[`)
	for i := range 100 {
		if i > 0 {
			text.WriteString(",")
		}
		fmt.Fprintf(&text, `{"key":"item-%d","task":{"agentId":"agent-%d","lane":"main","action":{"kind":"click","params":{"n":%d},"selector":"css:#b%d"},"labels":[{"key":"team","value":"web"}]}}`, i, i%4, i, i)
	}
	text.WriteString(`]}`)
	b := []byte(text.String())
	decode := func() {
		v, _, ok := DecodeSubmitTasksJSON(b)
		if !ok {
			t.Fatal("not read typed")
		}
		v.Release()
	}
	decode() // the pool's first room
	allocs := testing.AllocsPerRun(20, decode)
	// The reader, the input and its two optional values, the params'
	// buffer and the list of their places, and two chunks for the items'
	// 3.7 KB of strings: 8, where a string chunk an item made 106.
	if allocs > 8 {
		t.Fatalf("%v allocations for a batch of 100 items", allocs)
	}
	t.Logf("%v allocations", allocs)
}
