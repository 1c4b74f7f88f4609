package plugincache_test

import (
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/host"
)

var warm = flag.Bool("warm", false, "compile the built-in policies and the example plugins into the compilation caches")

// TestWarmPluginCaches compiles the built-in policies and the committed
// example plugins into os.UserCacheDir()/switchyard/wazero-test (the test
// packages' runtimes) and copies them to .../switchyard/wazero (the host's
// default, which serve and the plugin tools' private runtimes use within
// the cmd/switchyard tests). It must run in a test binary: wazero files
// its cache entries under its own version, which a test binary reads as
// "dev" and a built binary as the module's version, so that only a test
// binary's entries serve the tests. wazero keys an entry by the metered
// module and the CPU, not by how the host was built: compiled here
// without -race, they load in milliseconds under -race.
func TestWarmPluginCaches(t *testing.T) {
	if !*warm {
		t.Skip("fills the user's compilation caches: run with -args -warm")
	}
	uc, err := os.UserCacheDir()
	if err != nil {
		t.Skip("no user cache directory:", err)
	}
	type module struct {
		name string
		wasm []byte
	}
	var mods []module
	for _, m := range builtin.Modules() {
		mods = append(mods, module{"built-in " + m.Name, m.Wasm})
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "plugins", "*.wasm"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example plugins: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, module{f, b})
	}
	ctx := context.Background()
	// The default configuration: how a module is metered, and so its
	// cache key, depends on SetupFuel, which the tests leave be.
	src := filepath.Join(uc, "switchyard", "wazero-test")
	rt, err := host.New(host.Config{CacheDir: src})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		if _, err := rt.Validate(ctx, m.wasm); err != nil {
			t.Errorf("%s: %v", m.name, err)
		}
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := mirror(src, filepath.Join(uc, "switchyard", "wazero"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d modules compiled in %s; %d files copied to the default cache", len(mods), src, n)
}

// mirror copies each file under src that dst lacks to the same place
// under dst, and returns how many it copied.
func mirror(src, dst string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if _, err := os.Stat(to); err == nil {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return err
		}
		// Written whole, then renamed: a test reading the cache never sees
		// half a file.
		tmp := to + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		n++
		return os.Rename(tmp, to)
	})
	return n, err
}
