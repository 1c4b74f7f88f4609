package plugins_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/plugins/host"
)

// rt is shared by the package's tests, so that each module is compiled once
// per run however many tests load it, one after another or at once (and,
// with the file cache, once per machine).
var rt *host.Runtime

func TestMain(m *testing.M) {
	// Tests must not depend on timing; every example stays compiled
	// between the tests that load it.
	cfg := host.Config{Deadline: time.Minute, KeepCompiled: 16}
	if uc, err := os.UserCacheDir(); err == nil {
		cfg.CacheDir = filepath.Join(uc, "switchyard", "wazero-test")
	}
	var err error
	if rt, err = host.New(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = rt.Close(context.Background())
	os.Exit(code)
}

// load loads one of the committed example modules with a configuration; the
// plugin is closed at the end of the test.
func load(t *testing.T, file, config string) *host.Plugin {
	t.Helper()
	wasm, err := os.ReadFile(file)
	require.NoError(t, err)
	p, err := rt.Load(context.Background(), t.Name(), wasm, []byte(config))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}
