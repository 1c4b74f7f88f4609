package postgres_test

// Wake-up latencies through LISTEN/NOTIFY, with poll intervals long enough
// that only notifications wake anyone: a command until its submitter has the
// result, and a commit until a follower's Follow delivers it. Each reports
// the median and the 99th percentile.
//
//	go test ./engine/store/postgres -run '^$' -bench 'Wake|RoundTrip' -benchtime 300x

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
)

func reportLatencies(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

func slowPoll(o *postgres.Options) { o.PollInterval = time.Minute }

// BenchmarkCommandRoundTrip: SubmitCommand + AwaitCommand on a follower,
// TakeCommands + CompleteCommand on the leader.
func BenchmarkCommandRoundTrip(b *testing.B) {
	schema := newSchema(b)
	leader, fol := openStore(b, schema, slowPoll), openStore(b, schema, slowPoll)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cmds, err := leader.TakeCommands(ctx, 100)
			if err != nil {
				return
			}
			for _, c := range cmds {
				if err := leader.CompleteCommand(ctx, c.ID, json.RawMessage(`{"ok":true}`), nil); err != nil {
					return
				}
			}
			if len(cmds) == 0 && leader.WaitCommands(ctx) != nil {
				return
			}
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		id, err := fol.SubmitCommand(ctx, "f", "noop", json.RawMessage(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fol.AwaitCommand(ctx, id); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportLatencies(b, lat)
}

// BenchmarkFollowWake: a leader's Commit → a follower's Follow callback.
func BenchmarkFollowWake(b *testing.B) {
	schema := newSchema(b)
	leader, fol := openStore(b, schema, slowPoll), openStore(b, schema, slowPoll)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan time.Time, 1)
	go func() {
		_ = fol.Follow(ctx, 0, func([]engine.Event) error {
			got <- time.Now()
			return nil
		})
	}()
	for fol.ListenerPID() == 0 {
		time.Sleep(time.Millisecond)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := leader.Commit(ctx, taskBatch(uint64(i+1), 1)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-got).Sub(start))
	}
	reportLatencies(b, lat)
}
