package dashboard_test

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
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/web/dashboard"
	"github.com/switchyard/switchyard/graph/web/webbuild"
)

// pageConfig mirrors the JSON blob that src/config.ts reads.
type pageConfig struct {
	Title        string `json:"title"`
	Endpoint     string `json:"endpoint"`
	AuthRequired bool   `json:"authRequired"`
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

func mounted(t *testing.T, opts dashboard.Options) http.Handler {
	t.Helper()
	mux := http.NewServeMux()
	require.NoError(t, dashboard.Mount(mux, "/dashboard", opts))
	return mux
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
	h := mounted(t, dashboard.Options{Title: "Yard </script><b>", Endpoint: "/api/graphql", AuthRequired: true})
	res, page := serve(t, h, "/dashboard/", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, pageConfig{Title: "Yard </script><b>", Endpoint: "/api/graphql", AuthRequired: true}, readConfig(t, page))
	require.Equal(t, 2, bytes.Count(page, []byte("</script>")), "the title must not be able to close the config's <script> element")
	require.Contains(t, string(page), "<title>Yard &lt;/script&gt;&lt;b&gt;</title>")
	require.NotContains(t, string(page), "{{", "every placeholder is filled")

	_, page = serve(t, mounted(t, dashboard.Options{}), "/dashboard/", nil)
	require.Equal(t, pageConfig{Title: "Switchyard", Endpoint: "/graphql"}, readConfig(t, page))
}

func TestTheBarePrefixRedirectsToThePage(t *testing.T) {
	t.Parallel()
	res, _ := serve(t, mounted(t, dashboard.Options{}), "/dashboard", nil)
	require.Equal(t, http.StatusMovedPermanently, res.StatusCode)
	require.Equal(t, "/dashboard/", res.Header.Get("Location"))
}

func TestPageMayTalkToItsOwnOriginOnly(t *testing.T) {
	t.Parallel()
	res, _ := serve(t, mounted(t, dashboard.Options{}), "/dashboard/", nil)
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		require.Contains(t, csp, want)
	}
	require.NotContains(t, csp, "unsafe-inline")
	require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
}

func TestEndpointMustBeAPathOnTheServer(t *testing.T) {
	t.Parallel()
	for _, ep := range []string{"https://elsewhere.example.test/graphql", "//elsewhere.example.test/graphql", "graphql"} {
		_, err := dashboard.Handler(dashboard.Options{Endpoint: ep})
		require.Error(t, err, ep)
		require.Contains(t, err.Error(), "Options.Endpoint")
	}
}

var pageRef = regexp.MustCompile(`(?:href|src)="(assets/[^"]+)"`)

func TestEveryFileThePageNeedsIsServedWithTypeCachingAndGzip(t *testing.T) {
	t.Parallel()
	h := mounted(t, dashboard.Options{})
	_, page := serve(t, h, "/dashboard/", nil)
	var refs []string
	for _, m := range pageRef.FindAllSubmatch(page, -1) {
		refs = append(refs, string(m[1]))
	}
	require.Len(t, refs, 2, "one stylesheet and one script")
	wantType := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	for _, ref := range refs {
		res, plain := serve(t, h, "/dashboard/"+ref, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, ref)
		require.Equal(t, wantType[filepath.Ext(ref)], res.Header.Get("Content-Type"), ref)
		require.Equal(t, "public, max-age=31536000, immutable", res.Header.Get("Cache-Control"), ref)
		res, zipped := serve(t, h, "/dashboard/"+ref, http.Header{"Accept-Encoding": {"gzip"}})
		require.Equal(t, "gzip", res.Header.Get("Content-Encoding"), ref)
		zr, err := gzip.NewReader(bytes.NewReader(zipped))
		require.NoError(t, err)
		unzipped, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.Equal(t, plain, unzipped)
	}
	res, b := serve(t, h, "/dashboard/THIRD_PARTY_LICENSES.txt", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(b), "preact@")
	require.Contains(t, string(b), "graphql-ws@")
	for _, target := range []string{"/dashboard/package.json", "/dashboard/src/main.tsx", "/dashboard/assets/"} {
		res, _ := serve(t, h, target, nil)
		require.Equal(t, http.StatusNotFound, res.StatusCode, target)
	}
}

func TestDistHoldsMinifiedHashedAssetsWithoutSourceMaps(t *testing.T) {
	t.Parallel()
	hashed := regexp.MustCompile(`^dashboard-[A-Z0-9]{8}\.(js|css)$`)
	err := filepath.WalkDir("dist", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("dist", path)
		if dir, name := filepath.Split(rel); dir == "assets/" {
			require.Regexp(t, hashed, name)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NotContains(t, string(b), "sourceMappingURL", rel)
			lines := bytes.Count(b, []byte("\n")) + 1
			require.Greater(t, len(b)/lines, 1000, "%s is not minified", rel)
		} else {
			require.Contains(t, []string{"index.html", "THIRD_PARTY_LICENSES.txt"}, rel)
		}
		return nil
	})
	require.NoError(t, err)
}

// TestDistIsBuiltFromCurrentSources fails when a source changed without
// `go generate ./graph/web/...`.
func TestDistIsBuiltFromCurrentSources(t *testing.T) {
	t.Parallel()
	want, err := webbuild.InputsDigest(".")
	require.NoError(t, err)
	page, err := os.ReadFile("dist/index.html")
	require.NoError(t, err)
	got, err := webbuild.RecordedDigest(page)
	require.NoError(t, err)
	require.Equal(t, want, got, "dist/ is stale: run `go generate ./graph/web/...` (needs node and npm) and commit dist/")
}

// Budgets for the embedded build, a little above its size today (about
// 66 kB raw and 24 kB gzipped, printed by `npm run build`), so growth is a
// decision, not an accident.
const (
	rawBudget  = 96 << 10
	gzipBudget = 32 << 10
)

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
	t.Logf("embedded dashboard: %d bytes raw, %d bytes gzipped", raw, zipped)
	require.LessOrEqual(t, raw, rawBudget)
	require.LessOrEqual(t, zipped, gzipBudget)
}
