package host_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/plugins/authoring"
	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/host"
)

// cacheDir is shared by every runtime of this package's tests, so that each
// module is compiled once per run rather than once per test.
var cacheDir string

// guests holds the test guests of testdata/guests, built from source once
// per run.
var guests = map[string][]byte{}

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	d, err := os.MkdirTemp("", "switchyard-host-test")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(d)
	// A cache that outlives the run: wazero keys it by module hash and its
	// own version, and it saves the slow compiles (minutes under -race).
	if uc, err := os.UserCacheDir(); err == nil {
		cacheDir = filepath.Join(uc, "switchyard", "wazero-test")
	} else {
		cacheDir = filepath.Join(d, "cache")
	}
	names := []string{"faulty", "badretry", "badversion", "badimport", "noslot"}
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	built := make([][]byte, len(names))
	sem := make(chan struct{}, 2)
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out := filepath.Join(d, name+".wasm")
			if errs[i] = authoring.Build(context.Background(), filepath.Join("testdata", "guests", name), out); errs[i] != nil {
				return
			}
			built[i], errs[i] = os.ReadFile(out)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return 0, err
		}
		guests[names[i]] = built[i]
	}
	// Compile every module once into the shared cache, so that the tests'
	// own runtimes load them in milliseconds instead of compiling them
	// concurrently.
	rt, err := host.New(host.Config{CacheDir: cacheDir})
	if err != nil {
		return 0, err
	}
	mods := append([][]byte(nil), built...)
	for _, b := range builtin.Modules() {
		mods = append(mods, b.Wasm)
	}
	for _, w := range mods {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, _ = rt.Validate(context.Background(), w) // some are invalid on purpose: this only warms the cache
		})
	}
	wg.Wait()
	if err := rt.Close(context.Background()); err != nil {
		return 0, err
	}
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return m.Run(), nil
}

// newRuntime returns a runtime closed at the end of the test. Unless the
// test sets one, its deadline is a minute: on a busy machine a healthy
// decision's goroutine may wait longer than the default 10 ms for a core,
// and a test that does not test the deadline must not depend on timing.
func newRuntime(t testing.TB, cfg host.Config) *host.Runtime {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = cacheDir
	}
	if cfg.Deadline == 0 {
		cfg.Deadline = time.Minute
	}
	if cfg.DecisionCPU == 0 {
		cfg.DecisionCPU = time.Minute
	}
	rt, err := host.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, rt.Close(context.Background())) })
	return rt
}
