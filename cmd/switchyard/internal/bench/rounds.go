package bench

import (
	"context"
	"sync"
	"time"
)

// rounds is what measureRounds gathered in the measuring window.
type rounds struct {
	samples  [][]time.Duration // one slice per figure a round returns, in its order
	count    uint64            // rounds completed in the window
	errs     uint64            // rounds that failed, warm-up included
	firstErr string
	seconds  float64 // the window's length
}

// measureRounds runs round in a loop on each of n workers, discards what
// the warm-up gathers, and keeps every figure of the rounds that complete
// during the measured window. A round returns its figures (always as many,
// in the same order) or an error, which counts and is otherwise skipped;
// errors after ctx ends are not counted.
func measureRounds(ctx context.Context, n int, warmup, duration time.Duration, round func(ctx context.Context, worker int) ([]time.Duration, error)) *rounds {
	var (
		mu        sync.Mutex
		r         rounds
		measuring bool
	)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				figures, err := round(wctx, i)
				mu.Lock()
				switch {
				case err != nil && wctx.Err() == nil:
					r.errs++
					if r.firstErr == "" {
						r.firstErr = firstLine(err.Error())
					}
				case err == nil && measuring:
					for len(r.samples) < len(figures) {
						r.samples = append(r.samples, nil)
					}
					for j, d := range figures {
						r.samples[j] = append(r.samples[j], d)
					}
					r.count++
				}
				mu.Unlock()
			}
		}()
	}
	sleep(ctx, warmup)
	mu.Lock()
	measuring = true
	mu.Unlock()
	start := time.Now()
	sleep(ctx, duration)
	mu.Lock()
	measuring = false
	r.seconds = time.Since(start).Seconds()
	mu.Unlock()
	stop()
	wg.Wait()
	return &r
}

// figure returns the samples of the i-th figure (nil when no round completed).
func (r *rounds) figure(i int) []time.Duration {
	if i < len(r.samples) {
		return r.samples[i]
	}
	return nil
}
