package playground_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/web/playground"
	"github.com/switchyard/switchyard/graph/web/webbuild"
)

// pageConfig mirrors the JSON blob that src/config.js reads.
type pageConfig struct {
	Title                string `json:"title"`
	Endpoint             string `json:"endpoint"`
	SubscriptionEndpoint string `json:"subscriptionEndpoint"`
	DefaultQuery         string `json:"defaultQuery"`
	AuthRequired         bool   `json:"authRequired"`
}

var configBlob = regexp.MustCompile(`(?s)<script id="switchyard-config" type="application/json">(.*?)</script>`)

func serve(t *testing.T, h http.Handler, target string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, b
}

func newHandler(t *testing.T, opts playground.Options) http.Handler {
	t.Helper()
	h, err := playground.Handler(opts)
	require.NoError(t, err)
	return h
}

func readConfig(t *testing.T, page []byte) pageConfig {
	t.Helper()
	m := configBlob.FindSubmatch(page)
	require.NotNil(t, m, "page has no config blob:\n%s", page)
	var cfg pageConfig
	require.NoError(t, json.Unmarshal(m[1], &cfg), "config blob is not JSON: %s", m[1])
	return cfg
}

func TestPageCarriesTheServerConfiguration(t *testing.T) {
	t.Parallel()
	query := "# </script><script>alert(1)</script>\n{ hello }"
	h := newHandler(t, playground.Options{
		Title:                "Yard & <Co>",
		Endpoint:             "/api/graphql",
		SubscriptionEndpoint: "/api/subscriptions",
		DefaultQuery:         query,
		AuthRequired:         true,
	})
	res, page := serve(t, h, "/", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, pageConfig{
		Title:                "Yard & <Co>",
		Endpoint:             "/api/graphql",
		SubscriptionEndpoint: "/api/subscriptions",
		DefaultQuery:         query,
		AuthRequired:         true,
	}, readConfig(t, page))
	require.Equal(t, 2, bytes.Count(page, []byte("</script>")),
		"the default query must not be able to close the config's <script> element")
	require.Contains(t, string(page), "<title>Yard &amp; &lt;Co&gt;</title>")
	require.NotContains(t, string(page), "{{", "every placeholder is filled")
}

func TestDefaultsPointAtGraphQLOnTheSameHost(t *testing.T) {
	t.Parallel()
	_, page := serve(t, newHandler(t, playground.Options{}), "/", nil)
	require.Equal(t, pageConfig{Title: "Switchyard", Endpoint: "/graphql"}, readConfig(t, page))
	require.Contains(t, string(page), "<title>Switchyard</title>")
}

func TestPageIsLockedToItsOwnOrigin(t *testing.T) {
	t.Parallel()
	res, _ := serve(t, newHandler(t, playground.Options{}), "/", nil)
	csp := res.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "script-src 'self';")
	require.Contains(t, csp, "connect-src 'self';")
	require.Contains(t, csp, "frame-ancestors 'none'")
	require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
}

func TestAbsoluteEndpointsAreAllowedToConnect(t *testing.T) {
	t.Parallel()
	res, _ := serve(t, newHandler(t, playground.Options{
		Endpoint:             "https://api.example.test/graphql",
		SubscriptionEndpoint: "wss://events.example.test/graphql",
	}), "/", nil)
	csp := res.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "connect-src 'self' https://api.example.test wss://events.example.test wss://api.example.test;")
}

func TestInvalidEndpointsAreRefused(t *testing.T) {
	t.Parallel()
	for _, opts := range []playground.Options{
		{Endpoint: "ftp://example.test/graphql"},
		{Endpoint: "http://%zz/graphql"},
		{Endpoint: "https:///graphql"},
		{SubscriptionEndpoint: "mailto:ops@example.test"},
	} {
		_, err := playground.Handler(opts)
		require.Error(t, err, "%+v", opts)
		require.Contains(t, err.Error(), "playground: Options.")
	}
}

// assetRefs finds the files that the page and the bundle refer to: the
// stylesheet, script and preloaded chunks of index.html, the chunks a script
// imports (at once or on demand), Monaco's workers (named in a script) and
// the fonts of the stylesheet.
var (
	pageRef   = regexp.MustCompile(`(?:href|src)="(assets/[^"]+)"`)
	chunkRef  = regexp.MustCompile(`"\./(chunk-[A-Z0-9]{8}\.js)"`)
	workerRef = regexp.MustCompile(`"\./([a-z]+\.worker-[A-Z0-9]{8}\.js)"`)
	cssRef    = regexp.MustCompile(`url\("?\./([a-z0-9-]+-[A-Z0-9]{8}\.[a-z0-9]+)"?\)`)
	// staticImport is an import the browser fetches before the module runs.
	staticImport = regexp.MustCompile(`(?:^|[;}\n])import\s*(?:[^"();]*?from\s*)?"\./(chunk-[A-Z0-9]{8}\.js)"`)
)

func TestEveryFileThePageNeedsIsServedWithTypeAndLongCaching(t *testing.T) {
	t.Parallel()
	h := newHandler(t, playground.Options{})
	_, page := serve(t, h, "/", nil)

	var refs []string
	seen := map[string]bool{}
	add := func(ref string) {
		if !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	for _, m := range pageRef.FindAllSubmatch(page, -1) {
		add(string(m[1]))
	}
	for i := 0; i < len(refs); i++ {
		_, b := serve(t, h, "/"+refs[i], nil)
		for _, re := range []*regexp.Regexp{chunkRef, workerRef, cssRef} {
			for _, m := range re.FindAllSubmatch(b, -1) {
				add("assets/" + string(m[1]))
			}
		}
	}
	var workers, fonts int
	for _, ref := range refs {
		switch {
		case workerRef.MatchString(`"./` + strings.TrimPrefix(ref, "assets/") + `"`):
			workers++
		case filepath.Ext(ref) == ".ttf":
			fonts++
		}
	}
	require.Equal(t, 3, workers, "the scripts name Monaco's three workers")
	require.Equal(t, 1, fonts, "the stylesheet names one icon font")
	files, err := fs.Glob(os.DirFS("dist"), "assets/*")
	require.NoError(t, err)
	slices.Sort(files)
	require.Equal(t, files, slices.Sorted(slices.Values(refs)), "every asset is reached from the page, and only those")

	wantType := map[string]string{
		".js":  "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8",
		".ttf": "font/ttf",
	}
	for _, ref := range refs {
		res, b := serve(t, h, "/"+ref, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, ref)
		require.NotEmpty(t, b, ref)
		require.Equal(t, wantType[filepath.Ext(ref)], res.Header.Get("Content-Type"), ref)
		require.Equal(t, "public, max-age=31536000, immutable", res.Header.Get("Cache-Control"), ref)
	}

	res, b := serve(t, h, "/THIRD_PARTY_LICENSES.txt", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(b), "graphiql@5.")
	require.Contains(t, string(b), "monaco-editor@")
	require.Equal(t, "no-cache", res.Header.Get("Cache-Control"))
}

func TestLargeAssetsAreGzippedForBrowsers(t *testing.T) {
	t.Parallel()
	h := newHandler(t, playground.Options{})
	_, page := serve(t, h, "/", nil)
	m := regexp.MustCompile(`src="(assets/[^"]+\.js)"`).FindSubmatch(page)
	require.NotNil(t, m)
	_, plain := serve(t, h, "/"+string(m[1]), nil)
	res, zipped := serve(t, h, "/"+string(m[1]), http.Header{"Accept-Encoding": {"gzip, deflate, br"}})
	require.Equal(t, "gzip", res.Header.Get("Content-Encoding"))
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	require.NoError(t, err)
	unzipped, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, plain, unzipped)
}

func TestOnlyThePlaygroundsOwnPathsAreServed(t *testing.T) {
	t.Parallel()
	h := newHandler(t, playground.Options{})
	for _, target := range []string{"/graphql", "/dashboard", "/assets/", "/package.json", "/src/main.jsx"} {
		res, _ := serve(t, h, target, nil)
		require.Equal(t, http.StatusNotFound, res.StatusCode, target)
	}
}

// The embedded build must be minified, without source maps, with content
// hashes in every asset name.
func TestDistHoldsMinifiedHashedAssetsWithoutSourceMaps(t *testing.T) {
	t.Parallel()
	hashed := regexp.MustCompile(`^[a-z0-9.]+-[A-Z0-9]{8}\.(js|css|ttf|woff2?)$`)
	err := filepath.WalkDir("dist", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("dist", path)
		require.NotEqual(t, ".map", filepath.Ext(path), "no source maps in the embedded build")
		if dir, name := filepath.Split(rel); dir == "assets/" {
			require.Regexp(t, hashed, name)
		} else {
			require.Contains(t, []string{"index.html", "THIRD_PARTY_LICENSES.txt"}, rel)
		}
		if ext := filepath.Ext(path); ext == ".js" || ext == ".css" {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NotContains(t, string(b), "sourceMappingURL", rel)
			// Minified code keeps newlines only inside template literals,
			// and indents nothing. (A small chunk may be mostly template
			// literals, or its banner and one short line.)
			lines := bytes.Count(b, []byte("\n")) + 1
			require.True(t, len(b)/lines > 1000 || len(b) < 16<<10, "%s is not minified", rel)
			require.NotRegexp(t, `\n[ \t]+(const|let|var|function|return|if|for)\b`, string(b), "%s is not minified", rel)
		}
		return nil
	})
	require.NoError(t, err)
}

// TestDistIsBuiltFromCurrentSources compares the digest of the build's
// inputs with the one the build recorded in dist/index.html: it fails when a
// source changed without `go generate ./graph/web/...`.
func TestDistIsBuiltFromCurrentSources(t *testing.T) {
	t.Parallel()
	want, err := webbuild.InputsDigest(".")
	require.NoError(t, err)
	page, err := os.ReadFile("dist/index.html")
	require.NoError(t, err)
	got, err := webbuild.RecordedDigest(page)
	require.NoError(t, err)
	require.Equal(t, want, got,
		"dist/ is stale: run `go generate ./graph/web/...` (needs node and npm) and commit dist/")
}

// Budgets for the embedded build, a little above its size today (see the
// report printed by `npm run build`), so growth is a decision, not an accident.
const (
	rawBudget  = 6<<20 + 512<<10
	gzipBudget = 2 << 20
)

// The first load — what the browser fetches before the page can paint: the
// stylesheet, the entry module and the chunks it imports statically — has a
// budget of its own: 512 KiB gzipped, where the single 4.6 MB bundle was
// 1.3 MB. Monaco (the editors), its workers and prettier load after the
// first paint.
const (
	firstLoadGzipBudget = 512 << 10
	firstLoadRawBudget  = 1536 << 10
)

func TestFirstLoadStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("dist/index.html")
	require.NoError(t, err)
	var files []string
	seen := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		files = append(files, name)
		if filepath.Ext(name) != ".js" {
			return
		}
		b, err := os.ReadFile(filepath.Join("dist", name))
		require.NoError(t, err)
		for _, m := range staticImport.FindAllSubmatch(b, -1) {
			visit("assets/" + string(m[1]))
		}
	}
	for _, m := range regexp.MustCompile(`<link rel="stylesheet" href="(assets/[^"]+)"|<script type="module" src="(assets/[^"]+)"`).FindAllSubmatch(page, -1) {
		visit(string(append(m[1], m[2]...)))
	}
	require.Len(t, files[:2], 2, "a stylesheet and a script")
	preloaded := map[string]bool{}
	for _, m := range regexp.MustCompile(`<link rel="modulepreload" href="(assets/[^"]+)">`).FindAllSubmatch(page, -1) {
		preloaded[string(m[1])] = true
	}
	var raw, zipped int
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("dist", f))
		require.NoError(t, err)
		require.NotContains(t, string(b), "monaco-editor/esm/vs/editor/editor.main", f)
		if strings.HasPrefix(f, "assets/chunk-") {
			require.True(t, preloaded[f], "%s is imported at once, so it is preloaded", f)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(b)
		require.NoError(t, zw.Close())
		raw += len(b)
		zipped += buf.Len()
	}
	require.Len(t, preloaded, len(files)-2, "only the chunks of the first load are preloaded")
	t.Logf("first load: %d files, %d bytes raw, %d bytes gzipped", len(files), raw, zipped)
	require.LessOrEqual(t, zipped, firstLoadGzipBudget)
	require.LessOrEqual(t, raw, firstLoadRawBudget)
}

func TestEmbeddedBuildStaysWithinItsSizeBudget(t *testing.T) {
	t.Parallel()
	var raw, zipped int
	err := filepath.WalkDir("dist", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(b)
		require.NoError(t, zw.Close())
		raw += len(b)
		zipped += buf.Len()
		return nil
	})
	require.NoError(t, err)
	t.Logf("embedded playground: %d bytes raw, %d bytes gzipped", raw, zipped)
	require.LessOrEqual(t, raw, rawBudget)
	require.LessOrEqual(t, zipped, gzipBudget)
}
