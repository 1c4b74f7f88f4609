// Package spa serves one built single-page web application from an embedded
// file system: the HTML page (rendered once by the caller, with its
// configuration filled in) and the static files the build produced next to it.
//
// Files under the immutable prefix (default "assets/") carry a content hash
// in their names, so they are served with a one-year immutable cache
// lifetime; the page and every other file are revalidated on each use with a
// strong ETag. Text-like files are gzipped when the client accepts it, each
// compressed once, on first request, and kept.
package spa

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// DefaultImmutablePrefix is the folder of content-hashed files used when
// Options.ImmutablePrefix is empty.
const DefaultImmutablePrefix = "assets/"

// Cache-Control values.
const (
	cacheImmutable  = "public, max-age=31536000, immutable"
	cacheRevalidate = "no-cache"
)

// minGzipSize is the smallest body worth compressing.
const minGzipSize = 1024

// Options configure a Handler.
type Options struct {
	// Page is the HTML document served at "/" and "/index.html".
	Page []byte
	// PageHeaders are set on responses for the page, for example
	// Content-Security-Policy. Content-Type, Cache-Control and ETag are
	// set by the handler.
	PageHeaders http.Header
	// IndexName is the name of the page's template in the file system; it
	// is not served as a file (Page is served instead). Default "index.html".
	IndexName string
	// ImmutablePrefix is the folder whose files have content-hashed names.
	// Default DefaultImmutablePrefix.
	ImmutablePrefix string
}

// Handler serves a single-page app. It answers GET and HEAD only; unknown
// paths get 404 (no fallback to the page), so it can be mounted at "/" next
// to other handlers without hiding their mistakes.
type Handler struct {
	page  *file
	files map[string]*file
}

// file is one servable response body with its precomputed metadata.
type file struct {
	body         []byte
	contentType  string
	cacheControl string
	etag         string
	header       http.Header
	gzipped      func() []byte // nil when not worth compressing
}

// New builds a Handler over the files of assets. It reads every file once,
// so the file system should be an embedded one (embed.FS) or equally cheap.
func New(assets fs.FS, opts Options) (*Handler, error) {
	if len(opts.Page) == 0 {
		return nil, errors.New("spa: Options.Page is empty")
	}
	if opts.IndexName == "" {
		opts.IndexName = "index.html"
	}
	if opts.ImmutablePrefix == "" {
		opts.ImmutablePrefix = DefaultImmutablePrefix
	}
	h := &Handler{
		page:  newFile(opts.Page, ".html", cacheRevalidate, opts.PageHeaders),
		files: make(map[string]*file),
	}
	err := fs.WalkDir(assets, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || name == opts.IndexName {
			return nil
		}
		body, err := fs.ReadFile(assets, name)
		if err != nil {
			return err
		}
		cache := cacheRevalidate
		if strings.HasPrefix(name, opts.ImmutablePrefix) {
			cache = cacheImmutable
		}
		h.files[name] = newFile(body, path.Ext(name), cache, nil)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("spa: read assets: %w", err)
	}
	return h, nil
}

func newFile(body []byte, ext, cacheControl string, header http.Header) *file {
	sum := sha256.Sum256(body)
	tag := hex.EncodeToString(sum[:12])
	f := &file{
		body:         body,
		contentType:  ContentType(ext),
		cacheControl: cacheControl,
		etag:         `"` + tag + `"`,
		header:       header,
	}
	if len(body) >= minGzipSize && compressible(f.contentType) {
		f.gzipped = sync.OnceValue(func() []byte { return gzipBytes(body) })
	}
	return f
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	f := h.lookup(r.URL.Path)
	if f == nil {
		http.NotFound(w, r)
		return
	}
	f.serve(w, r)
}

func (h *Handler) lookup(urlPath string) *file {
	p := path.Clean("/" + urlPath)
	if p == "/" || p == "/index.html" {
		return h.page
	}
	return h.files[strings.TrimPrefix(p, "/")]
}

func (f *file) serve(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	for k, v := range f.header {
		hdr[k] = slices.Clone(v)
	}
	body, etag := f.body, f.etag
	if f.gzipped != nil {
		hdr.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			body = f.gzipped()
			etag = f.etag[:len(f.etag)-1] + `-gzip"`
			hdr.Set("Content-Encoding", "gzip")
		}
	}
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("Cache-Control", f.cacheControl)
	hdr.Set("ETag", etag)
	hdr.Set("X-Content-Type-Options", "nosniff")
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		hdr.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body) // the client went away: nothing to do
	}
}

// ContentType returns the Content-Type for a file name extension such as
// ".js". The types that web builds emit are fixed here, so responses do not
// depend on the host's MIME tables; others come from those tables, or are
// application/octet-stream.
func ContentType(ext string) string {
	switch ext = strings.ToLower(ext); ext {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".json", ".map":
		return "application/json"
	case ".txt":
		return "text/plain; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".ico":
		return "image/x-icon"
	case ".ttf":
		return "font/ttf"
	case ".otf":
		return "font/otf"
	case ".woff":
		return "font/woff"
	case ".woff2":
		return "font/woff2"
	case ".wasm":
		return "application/wasm"
	}
	if ct := mime.TypeByExtension(ext); ct != "" {
		return ct
	}
	return "application/octet-stream"
}

func compressible(contentType string) bool {
	mediaType, _, _ := strings.Cut(contentType, ";")
	switch {
	case strings.HasPrefix(mediaType, "text/"):
		return true
	case mediaType == "application/json", mediaType == "image/svg+xml",
		mediaType == "font/ttf", mediaType == "font/otf", mediaType == "application/wasm":
		return true
	}
	return false // png, woff, woff2 are compressed already
}

func gzipBytes(body []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // valid level: no error
	_, _ = zw.Write(body)                                    // writes to a bytes.Buffer do not fail
	_ = zw.Close()
	return buf.Bytes()
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip.
func acceptsGzip(header string) bool {
	gzipQ, starQ := -1.0, -1.0
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			gzipQ = q
		case "*":
			starQ = q
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

// etagMatches implements the weak comparison of If-None-Match (RFC 9110
// §13.1.2) against the current entity tag.
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for candidate := range strings.SplitSeq(header, ",") {
		candidate = strings.TrimSpace(candidate)
		if candidate == "*" || strings.TrimPrefix(candidate, "W/") == etag {
			return true
		}
	}
	return false
}
