package engine_test

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheEngineImportsNoneOfItsConsumers holds the promise of the package
// doc: the engine knows nothing of HTTP, GraphQL or WebAssembly, and the
// packages that use it (executor, webhooks, schedules, heartbeats, pull
// workers, the API, the plugin runtime, node wiring) stay outside it. It
// walks the engine's non-test imports, transitively.
func TestTheEngineImportsNoneOfItsConsumers(t *testing.T) {
	const module = "github.com/switchyard/switchyard/"
	forbidden := []string{
		"net/http",
		"github.com/tetratelabs/wazero",
		"github.com/99designs/gqlgen",
		module + "graph",
		module + "executor",
		module + "webhook",
		module + "schedule",
		module + "heartbeat",
		module + "pull",
		module + "plugins/host",
		module + "plugins/manager",
		module + "internal/cluster",
		module + "cmd",
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{} // import path → who imported it first
	var walk func(path, from string)
	walk = func(path, from string) {
		if _, ok := seen[path]; ok {
			return
		}
		seen[path] = from
		for _, bad := range forbidden {
			if path == bad || strings.HasPrefix(path, bad+"/") {
				t.Errorf("%s imports %s, which the engine must not depend on", from, path)
				return
			}
		}
		if !strings.HasPrefix(path, module) {
			return // the standard library and third-party modules: only the forbidden list matters
		}
		dir := filepath.Join(root, strings.TrimPrefix(path, module))
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			return // a module outside this one (the plugin SDK is a module of its own)
		}
		for _, imp := range pkg.Imports {
			walk(imp, path)
		}
	}
	walk(module+"engine", "(test)")
	if len(seen) < 5 {
		t.Fatalf("walked only %d packages: the walk does not see the engine's imports", len(seen))
	}
}
