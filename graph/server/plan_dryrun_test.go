package server_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// A reader's plan queries cannot quarantine a fairness plugin: a module
// that holds in real decisions and faults only in previews (DRY_RUN) stays
// ACTIVE however often the plan is asked, its faults counted apart in
// switchyard_plugin_dry_run_faults_total, and the plan's step saying that
// the fallback previewed; real dispatch stays held.
func TestPlanQueriesDoNotQuarantineAFairnessPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.plugins = true })
	ctx := ctxFor(t)
	require.NoError(t, b.c.Do(ctx, `mutation($w: String!) { loadPlugin(input: {name: "previewspin", wasmBase64: $w}) { name } }`,
		map[string]any{"w": base64.StdEncoding.EncodeToString(plugintest.HoldSpinningInDryRun())}, nil))
	require.NoError(t, b.c.Do(ctx, `mutation { setPolicy(input: {slot: FAIRNESS, name: "previewspin"}) { name } }`, nil, nil))
	id := b.submit(t, "reader", nil)
	// Six previews in which the module faulted: more than
	// plugins.breakerThreshold (5). A fault discards the instance; a preview
	// asked while its replacement is built (slow on a loaded machine) falls
	// back for that reason instead, without asking the module, and counts
	// as no fault.
	faulted := 0
	waitfor.Eventually(t, "six previews in which previewspin faulted", func() bool {
		var res struct {
			Plan struct{ Steps []struct{ Reason string } }
		}
		require.NoError(t, b.c.Do(ctx, `{ plan(limit: 3) { steps { reason } } }`, nil, &res))
		require.NotEmpty(t, res.Plan.Steps)
		switch reason := res.Plan.Steps[0].Reason; {
		case strings.Contains(reason, "native fallback of policy previewspin (previewspin did not decide: it faulted: "): // fuel or CPU time, or on a starved machine the deadline
			faulted++
		case strings.Contains(reason, "native fallback of policy previewspin") && strings.Contains(reason, "its instance is being rebuilt after a fault"):
		default:
			t.Fatalf("a preview's reason: %s", reason)
		}
		return faulted == 6
	})
	var res struct {
		Plugins []struct {
			Name   string
			State  string
			Faults int64
		}
		Task struct {
			State string
			Hold  *struct{ Policy string }
		}
	}
	require.NoError(t, b.c.Do(ctx, `query($id: ID!) { plugins { name state faults } task(id: $id) { state hold { policy } } }`, map[string]any{"id": id}, &res))
	for _, p := range res.Plugins {
		if p.Name == "previewspin" {
			require.Equal(t, "ACTIVE", p.State)
			require.Zero(t, p.Faults)
		}
	}
	require.Equal(t, "QUEUED", res.Task.State, "real dispatch is still held")
	_, body, _ := get(t, b.base+"/metrics")
	require.Contains(t, body, `switchyard_plugin_dry_run_faults_total{plugin="previewspin"} 6`)
	require.Contains(t, body, `switchyard_plugin_quarantines_total{plugin="previewspin"} 0`)
}
