//go:build !wasip1

package selection

import (
	"reflect"
	"testing"

	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

// byDeadline ranks a task by its deadline.
type byDeadline struct{}

func (byDeadline) Rank(_ int64, tasks []policy.Task, ranks []int64) {
	for i := range tasks {
		ranks[i] = tasks[i].DeadlineMs
	}
}

// The export's straight path and its general path rank alike: the same
// tasks, written with v1 records (the straight path) and with longer ones
// from a newer host (the general path, field by field), get the same ranks.
func TestTheStraightPathRanksAsTheGeneralOne(t *testing.T) {
	if registered == nil { // once: -count runs the test again in the same process
		Register(byDeadline{})
	}
	tasks := []policy.Task{{Seq: 1, DeadlineMs: 30}, {Seq: 2, DeadlineMs: 10}, {Seq: 3, DeadlineMs: 20}}
	a := guest.Arena
	rankWith := func(size uint32) []int64 {
		clear(a[:1024])
		abi.PutHeader(a, abi.Header{Layout: abi.LayoutVersion, RecordSize: size, Count: 3})
		for i := range tasks {
			abi.PutTask(a[abi.HeaderSize+int(size)*i:], &tasks[i])
		}
		if n := rank(0); n != 3 {
			t.Fatalf("record size %d: rank returned %d, want 3 (reason %q)", size, n, guest.LastReason)
		}
		return append([]int64(nil), abi.Int64s(a[abi.OutputOffset(3, size):], 3)...)
	}
	want := []int64{30, 10, 20}
	if got := rankWith(abi.TaskSize); !reflect.DeepEqual(got, want) {
		t.Errorf("straight path: got %v, want %v", got, want)
	}
	if got := rankWith(abi.TaskSize + 8); !reflect.DeepEqual(got, want) {
		t.Errorf("general path: got %v, want %v", got, want)
	}
	abi.PutHeader(a, abi.Header{Layout: abi.LayoutVersion + 1, RecordSize: abi.TaskSize, Count: 3})
	if n := rank(0); n != abi.ErrGuest || guest.LastReason == "" {
		t.Errorf("unknown layout: got %d and reason %q, want a refusal", n, guest.LastReason)
	}
}
