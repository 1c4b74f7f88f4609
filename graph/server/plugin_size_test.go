package server_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/plugins/manager"
)

// An upload over plugins.maxWasmBytes, refused before it is decoded, is
// refused as the manager refuses a module over the cap: LIMIT on
// input.wasmBase64, and a REFUSED event whose reason names the load, the
// size and the limit, for the operator watching pluginEvents.
func TestAnUploadOverTheCapIsARefusedEventToo(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.plugins = true
		o.maxWasm = 4096
	})
	events, stop := b.plugins.Subscribe(4)
	defer stop()
	wasm := plugintest.Padded(plugintest.RetryAnswer(2), 5000)
	err := b.c.Do(context.Background(), `mutation($w: String!) { loadPlugin(input: {name: "big", wasmBase64: $w}) { name } }`,
		map[string]any{"w": base64.StdEncoding.EncodeToString(wasm)}, nil)
	e := gqlErr(t, err)
	require.Equal(t, "LIMIT", e.Code())
	require.Equal(t, "input.wasmBase64", e.Field())
	require.Contains(t, e.Message, "the limit is 4096 (plugins.maxWasmBytes)")
	select {
	case ev := <-events:
		require.Equal(t, manager.EventRefused, ev.Kind)
		require.Equal(t, "big", ev.Plugin)
		require.True(t, strings.HasPrefix(ev.Reason, `load plugin "big": the module is about `), ev.Reason)
		require.Contains(t, ev.Reason, "the limit is 4096 (plugins.maxWasmBytes)")
	case <-time.After(30 * time.Second): // a bound on a hang, not a measurement
		t.Fatal("no REFUSED event for the upload over the cap")
	}
}
