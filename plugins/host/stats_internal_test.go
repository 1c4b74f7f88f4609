package host

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The latency figures the plugins query reports hold p50 <= p99 <= max for
// any distribution (a bucket's upper bound may lie above the largest value
// seen, and is clamped), and are all zero, with nothing observed, before
// the first decision: the API shows null percentiles then.
func TestLatencyQuantilesAreOrderedAndEmptyBeforeTheFirstDecision(t *testing.T) {
	t.Parallel()
	var h histogram
	p50, p99, top, n := h.quantiles()
	require.Zero(t, n)
	require.Equal(t, [3]time.Duration{}, [3]time.Duration{p50, p99, top})

	r := rand.New(rand.NewPCG(1, 2))
	shapes := map[string]func() uint64{
		"one value":      func() uint64 { return 1234 },
		"uniform":        func() uint64 { return r.Uint64N(1_000_000) },
		"heavy tail":     func() uint64 { return uint64(r.ExpFloat64() * 5_000) },
		"two modes":      func() uint64 { return []uint64{900, 2_000_000}[r.IntN(2)] },
		"tiny":           func() uint64 { return r.Uint64N(8) },
		"bucket top":     func() uint64 { return upper(bucketOf(50_000)) },
		"just past edge": func() uint64 { return 1<<20 + 1 },
	}
	for name, draw := range shapes {
		for _, count := range []int{1, 2, 3, 99, 100, 101, 5000} {
			h.reset()
			var largest uint64
			for range count {
				v := draw()
				largest = max(largest, v)
				h.observe(v)
			}
			p50, p99, top, n := h.quantiles()
			require.Equal(t, uint64(count), n, "%s × %d", name, count)
			require.LessOrEqual(t, p50, p99, "%s × %d: p50 %v > p99 %v", name, count, p50, p99)
			require.LessOrEqual(t, p99, top, "%s × %d: p99 %v > max %v", name, count, p99, top)
			require.Equal(t, time.Duration(largest), top, "%s × %d", name, count)
		}
	}
}
