package server_test

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/waitfor"
)

// A plugin's fallbacks by cause and its deadline graces read in the API as
// in the Prometheus series (switchyard_plugin_fallbacks_total's cause label,
// switchyard_plugin_deadline_graces_total): a plugin whose answers are
// invalid falls back for faults, the counts by cause add up to fallbacks
// once its decisions are over, and a native policy has neither.
func TestPluginShowsItsFallbacksByCauseAndDeadlineGracesAsTheMetricsDo(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.plugins = true }, succeed)
	ctx := ctxFor(t)
	wasm, err := hex.DecodeString(garbageFairness)
	require.NoError(t, err)
	require.NoError(t, b.c.Do(ctx, `mutation($w: String!) { loadPlugin(input: {name: "garbage", wasmBase64: $w}) { name } }`,
		map[string]any{"w": base64.StdEncoding.EncodeToString(wasm)}, nil))
	require.NoError(t, b.c.Do(ctx, `mutation { setPolicy(input: {slot: FAIRNESS, name: "garbage"}) { name } }`, nil, nil))
	require.NoError(t, b.c.Do(ctx, `mutation { updateLane(name: "main", input: {paused: true}) { name } }`, nil, nil))
	ids := make([]string, 12)
	for i := range ids { // twelve queue heads: one decision over more than 8 candidates
		ids[i] = b.submit(t, fmt.Sprintf("agent-%d", i), nil)
	}
	require.NoError(t, b.c.Do(ctx, `mutation { updateLane(name: "main", input: {paused: false}) { name } }`, nil, nil))
	waitfor.Eventually(t, "every task done, its decisions over", func() bool {
		for _, id := range ids {
			if b.state(t, id) != "SUCCEEDED" {
				return false
			}
		}
		return true
	})

	type count struct {
		Cause string
		Count int64
	}
	type plugin struct {
		Name             string
		Fallbacks        int64
		FallbacksByCause []count
		DeadlineGraces   int64
	}
	read := func(name string) plugin {
		var out struct{ Plugin plugin }
		require.NoError(t, b.c.Do(ctx, `query($n: String!) { plugin(name: $n) { name fallbacks fallbacksByCause { cause count } deadlineGraces } }`,
			map[string]any{"n": name}, &out))
		return out.Plugin
	}
	p := read("garbage")
	require.Positive(t, p.Fallbacks, "its invalid answers fell back")
	require.NotEmpty(t, p.FallbacksByCause)
	require.Equal(t, "FAULT", p.FallbacksByCause[0].Cause, "causes come in the enum's order, faults first: %+v", p.FallbacksByCause)
	var sum int64
	for _, c := range p.FallbacksByCause {
		require.Positive(t, c.Count, "causes with none are left out: %+v", p.FallbacksByCause)
		sum += c.Count
	}
	require.Equal(t, p.Fallbacks, sum, "the causes add up to fallbacks: %+v", p.FallbacksByCause)

	_, body, _ := get(t, b.base+"/metrics")
	series := func(re string) int64 {
		m := regexp.MustCompile(re).FindStringSubmatch(body)
		require.NotNil(t, m, "no series %s", re)
		n, err := strconv.ParseInt(m[1], 10, 64)
		require.NoError(t, err)
		return n
	}
	for _, c := range []struct{ cause, label string }{{"FAULT", "fault"}, {"BREAKER", "breaker"}, {"CLOSED", "closed"}, {"REBUILDING", "rebuilding"}, {"TOO_LARGE", "too-large"}} {
		var api int64
		for _, got := range p.FallbacksByCause {
			if got.Cause == c.cause {
				api = got.Count
			}
		}
		require.Equal(t, series(`switchyard_plugin_fallbacks_total\{cause="`+c.label+`",plugin="garbage"\} (\d+)`), api, "cause %s", c.cause)
	}
	require.Equal(t, series(`switchyard_plugin_deadline_graces_total\{plugin="garbage"\} (\d+)`), p.DeadlineGraces)

	n := read("native:fair-share")
	require.Empty(t, n.FallbacksByCause, "a native policy does not fall back")
	require.Zero(t, n.DeadlineGraces)
}
