package webbuild_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/web/webbuild"
)

// newApp lays out a minimal app folder next to a webbuild folder, as in
// graph/web/, and returns the app's path.
func newApp(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{
		"app/build.mjs":             "build",
		"app/package.json":          "{}",
		"app/package-lock.json":     "{}",
		"app/src/main.js":           "main",
		"app/src/deep/more.css":     "css",
		"webbuild/webbuild.mjs":     "shared",
		"app/dist/index.html":       "output: not an input",
		"app/node_modules/x/y.js":   "dependency: covered by the lockfile",
		"other/unrelated/file.json": "not an input",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return filepath.Join(root, "app")
}

func TestInputsDigestChangesWithEveryInputAndOnlyWithInputs(t *testing.T) {
	t.Parallel()
	app := newApp(t)
	base, err := webbuild.InputsDigest(app)
	require.NoError(t, err)
	require.Len(t, base, 64)

	for _, rel := range []string{"dist/index.html", "node_modules/x/y.js", "../other/unrelated/file.json"} {
		require.NoError(t, os.WriteFile(filepath.Join(app, rel), []byte("changed"), 0o644))
		got, err := webbuild.InputsDigest(app)
		require.NoError(t, err)
		require.Equal(t, base, got, "%s is not a build input", rel)
	}

	for _, rel := range []string{"build.mjs", "package.json", "package-lock.json", "src/main.js", "src/deep/more.css", "src/new.js", "../webbuild/webbuild.mjs"} {
		require.NoError(t, os.WriteFile(filepath.Join(app, rel), []byte("changed "+rel), 0o644))
		got, err := webbuild.InputsDigest(app)
		require.NoError(t, err)
		require.NotEqual(t, base, got, "changing %s must change the digest", rel)
		base = got
	}
}

func TestInputsDigestFailsWithoutTheSharedModule(t *testing.T) {
	t.Parallel()
	app := newApp(t)
	require.NoError(t, os.Remove(filepath.Join(app, "..", "webbuild", "webbuild.mjs")))
	_, err := webbuild.InputsDigest(app)
	require.ErrorContains(t, err, "webbuild.mjs")
}

func TestRecordedDigestReadsTheMetaTag(t *testing.T) {
	t.Parallel()
	const sum = "6c9e0a6231165717cb468b815d49431658bc570e5d042897c5813b9e67f763bb"
	got, err := webbuild.RecordedDigest([]byte(`<head><meta name="switchyard-build-inputs" content="` + sum + `"></head>`))
	require.NoError(t, err)
	require.Equal(t, sum, got)
	_, err = webbuild.RecordedDigest([]byte(`<head></head>`))
	require.Error(t, err)
}
