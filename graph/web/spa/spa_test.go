package spa_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/web/spa"
)

// bigJS is a compressible body above the gzip threshold.
var bigJS = []byte(strings.Repeat("console.log('switchyard');\n", 200))

type testBundle struct {
	handler *spa.Handler
	page    []byte
}

func setup(t *testing.T) testBundle {
	t.Helper()
	files := fstest.MapFS{
		"index.html":                  {Data: []byte("<p>{{TEMPLATE}}</p>")},
		"assets/app-ABCD1234.js":      {Data: bigJS},
		"assets/app-ABCD1234.css":     {Data: []byte("body{margin:0}")},
		"assets/font-EFGH5678.woff2":  {Data: bytes.Repeat([]byte{0x77}, 4096)},
		"assets/codicon-IJKL9012.ttf": {Data: bytes.Repeat([]byte{0, 1, 0, 0}, 1024)},
		"THIRD_PARTY_LICENSES.txt":    {Data: []byte("MIT\n")},
	}
	page := []byte("<!doctype html><title>rendered</title>")
	h, err := spa.New(files, spa.Options{
		Page:        page,
		PageHeaders: http.Header{"Content-Security-Policy": {"default-src 'self'"}},
	})
	require.NoError(t, err)
	return testBundle{handler: h, page: page}
}

func get(t *testing.T, h http.Handler, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return b
}

func TestPageIsServedAtRootRevalidatedAndWithItsHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, target := range []string{"/", "/index.html", "/assets/../index.html"} {
		res := get(t, b.handler, http.MethodGet, target, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, target)
		require.Equal(t, b.page, body(t, res), "%s must serve the rendered page, not the template", target)
		require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
		require.Equal(t, "no-cache", res.Header.Get("Cache-Control"))
		require.NotEmpty(t, res.Header.Get("ETag"))
		require.Equal(t, "default-src 'self'", res.Header.Get("Content-Security-Policy"))
		require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	}
}

func TestAssetsHaveFixedContentTypesAndImmutableCaching(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for target, want := range map[string]string{
		"/assets/app-ABCD1234.js":      "text/javascript; charset=utf-8",
		"/assets/app-ABCD1234.css":     "text/css; charset=utf-8",
		"/assets/font-EFGH5678.woff2":  "font/woff2",
		"/assets/codicon-IJKL9012.ttf": "font/ttf",
	} {
		res := get(t, b.handler, http.MethodGet, target, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, target)
		require.Equal(t, want, res.Header.Get("Content-Type"), target)
		require.Equal(t, "public, max-age=31536000, immutable", res.Header.Get("Cache-Control"), target)
		require.NotEmpty(t, res.Header.Get("ETag"), target)
		require.Empty(t, res.Header.Get("Content-Security-Policy"), "page headers are for the page only")
	}
}

func TestFilesOutsideTheHashedFolderAreRevalidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := get(t, b.handler, http.MethodGet, "/THIRD_PARTY_LICENSES.txt", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/plain; charset=utf-8", res.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", res.Header.Get("Cache-Control"))
	require.Equal(t, "MIT\n", string(body(t, res)))
}

func TestMatchingETagGets304WithoutBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, target := range []string{"/", "/assets/app-ABCD1234.css", "/THIRD_PARTY_LICENSES.txt"} {
		first := get(t, b.handler, http.MethodGet, target, nil)
		etag := first.Header.Get("ETag")
		for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
			res := get(t, b.handler, http.MethodGet, target, http.Header{"If-None-Match": {inm}})
			require.Equal(t, http.StatusNotModified, res.StatusCode, "%s If-None-Match: %s", target, inm)
			require.Empty(t, body(t, res))
			require.Equal(t, etag, res.Header.Get("ETag"))
		}
		res := get(t, b.handler, http.MethodGet, target, http.Header{"If-None-Match": {`"stale"`}})
		require.Equal(t, http.StatusOK, res.StatusCode, target)
	}
}

func TestGzipIsServedOnlyToClientsThatAcceptIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plain := get(t, b.handler, http.MethodGet, "/assets/app-ABCD1234.js", nil)
	require.Empty(t, plain.Header.Get("Content-Encoding"))
	require.Equal(t, "Accept-Encoding", plain.Header.Get("Vary"))
	require.Equal(t, bigJS, body(t, plain))

	zipped := get(t, b.handler, http.MethodGet, "/assets/app-ABCD1234.js", http.Header{"Accept-Encoding": {"br, gzip, deflate"}})
	require.Equal(t, "gzip", zipped.Header.Get("Content-Encoding"))
	require.Equal(t, "Accept-Encoding", zipped.Header.Get("Vary"))
	require.NotEqual(t, plain.Header.Get("ETag"), zipped.Header.Get("ETag"), "each encoding needs its own strong ETag")
	compressed := body(t, zipped)
	require.Less(t, len(compressed), len(bigJS)/4)
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	require.NoError(t, err)
	unzipped, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, bigJS, unzipped)

	again := get(t, b.handler, http.MethodGet, "/assets/app-ABCD1234.js",
		http.Header{"Accept-Encoding": {"gzip"}, "If-None-Match": {zipped.Header.Get("ETag")}})
	require.Equal(t, http.StatusNotModified, again.StatusCode)
}

func TestSmallAndPrecompressedFilesAreNotGzipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, target := range []string{"/assets/app-ABCD1234.css", "/assets/font-EFGH5678.woff2"} {
		res := get(t, b.handler, http.MethodGet, target, http.Header{"Accept-Encoding": {"gzip"}})
		require.Empty(t, res.Header.Get("Content-Encoding"), target)
		require.Empty(t, res.Header.Get("Vary"), target)
	}
	res := get(t, b.handler, http.MethodGet, "/assets/codicon-IJKL9012.ttf", http.Header{"Accept-Encoding": {"gzip"}})
	require.Equal(t, "gzip", res.Header.Get("Content-Encoding"), "TrueType fonts compress well")
}

func TestUnknownPathsAre404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, target := range []string{"/graphql", "/assets/", "/assets", "/assets/missing-ABCD1234.js", "/../../etc/passwd", "/index.htm"} {
		res := get(t, b.handler, http.MethodGet, target, nil)
		require.Equal(t, http.StatusNotFound, res.StatusCode, target)
	}
}

func TestOnlyGetAndHeadAreAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := get(t, b.handler, http.MethodPost, "/", nil)
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	require.Equal(t, "GET, HEAD", res.Header.Get("Allow"))

	head := get(t, b.handler, http.MethodHead, "/assets/app-ABCD1234.js", nil)
	require.Equal(t, http.StatusOK, head.StatusCode)
	require.Empty(t, body(t, head))
	require.Equal(t, "5400", head.Header.Get("Content-Length"))
}

func TestNewRefusesAnEmptyPage(t *testing.T) {
	t.Parallel()
	_, err := spa.New(fstest.MapFS{}, spa.Options{})
	require.ErrorContains(t, err, "Page is empty")
}

func TestContentTypeDoesNotDependOnTheHostMIMETable(t *testing.T) {
	t.Parallel()
	require.Equal(t, "text/javascript; charset=utf-8", spa.ContentType(".JS"))
	require.Equal(t, "font/woff2", spa.ContentType(".woff2"))
	require.Equal(t, "application/octet-stream", spa.ContentType(".no-such-extension"))
}

func TestConcurrentFirstRequestsGetTheSameCompressedBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 8
	bodies := make(chan []byte, n)
	for range n {
		go func() {
			res := get(t, b.handler, http.MethodGet, "/assets/app-ABCD1234.js", http.Header{"Accept-Encoding": {"gzip"}})
			raw, _ := io.ReadAll(res.Body)
			bodies <- raw
		}()
	}
	first := <-bodies
	for range n - 1 {
		require.Equal(t, first, <-bodies)
	}
}

// TestEmbeddedServesTheBuiltAppOfDist: Embedded renders dist/index.html with
// the title (escaped) and the configuration, serves it with the headers
// given, serves the rest of dist/ and nothing outside it, and names the app
// in its errors.
func TestEmbeddedServesTheBuiltAppOfDist(t *testing.T) {
	t.Parallel()
	embedded := fstest.MapFS{
		"dist/index.html":          {Data: []byte("<title>{{TITLE}}</title><script>{{CONFIG}}</script>")},
		"dist/assets/app-ABCD.js":  {Data: []byte("go()")},
		"generate.go":              {Data: []byte("package app")},
		"other/assets/app-ABCD.js": {Data: []byte("not served")},
	}
	h, err := spa.Embedded(embedded, "app", "a <b>", map[string]int{"n": 1}, spa.PageHeaders("default-src 'none'"))
	require.NoError(t, err)
	res := get(t, h, http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, `<title>a &lt;b&gt;</title><script>{"n":1}</script>`, string(body(t, res)))
	require.Equal(t, "default-src 'none'", res.Header.Get("Content-Security-Policy"))
	res = get(t, h, http.MethodGet, "/assets/app-ABCD.js", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "go()", string(body(t, res)))
	require.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, "/generate.go", nil).StatusCode)

	_, err = spa.Embedded(fstest.MapFS{"index.html": {Data: []byte("{{TITLE}}{{CONFIG}}")}}, "app", "t", nil, nil)
	require.ErrorContains(t, err, "app: embedded index.html", "no dist/: nothing to serve")
	_, err = spa.Embedded(fstest.MapFS{"dist/index.html": {Data: []byte("{{TITLE}}")}}, "app", "t", nil, nil)
	require.ErrorContains(t, err, "app: embedded index.html lacks {{CONFIG}}")
}
