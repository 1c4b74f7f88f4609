package simulate_test

import (
	"bytes"
	"testing"

	"github.com/switchyard/switchyard/engine/simulate"
)

// FuzzReadWorkload: any input parses into submissions or fails with an
// error naming the line; what parses writes back and reads the same.
func FuzzReadWorkload(f *testing.F) {
	f.Add([]byte(`{"atMs":0,"agent":"a","durationMs":10}` + "\n# comment\n" + `{"atMs":5,"agent":"b","priority":"HIGH","durationMs":1,"outcome":"transient"}`))
	f.Add([]byte(`{"atMs":-1,"agent":"a"}`))
	f.Add([]byte(`{"atMs":0,"agent":"a","durationMs":1,"outcome":"transient","code":"upstream_503","attempts":[{"outcome":"permanent","code":"captcha"},{"outcome":"ok"}]}`))
	f.Add([]byte("\x00\xff{"))
	f.Fuzz(func(t *testing.T, in []byte) {
		subs, err := simulate.ReadWorkload(bytes.NewReader(in))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := simulate.WriteWorkload(&buf, subs); err != nil {
			t.Fatal(err)
		}
		again, err := simulate.ReadWorkload(&buf)
		if err != nil || len(again) != len(subs) {
			t.Fatalf("round trip: %v (%d vs %d)", err, len(again), len(subs))
		}
	})
}
