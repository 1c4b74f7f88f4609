package host_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/plugins/host"
)

// cacheDir is shared by every runtime of this package's tests, so that each
// module is compiled once per run rather than once per test.
var cacheDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "switchyard-host-test-cache")
	if err != nil {
		panic(err)
	}
	cacheDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// newRuntime returns a runtime closed at the end of the test.
func newRuntime(t testing.TB, cfg host.Config) *host.Runtime {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = cacheDir
	}
	rt, err := host.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, rt.Close(context.Background())) })
	return rt
}
