package doccheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rootFiles are files at the repository's root that docs cite by name.
var rootFiles = map[string]bool{"README.md": true, "gqlgen.yml": true, "go.mod": true}

var (
	// mdLink is the target of a Markdown link: [text](target).
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// goSelector is a package path followed by one of its identifiers.
	goSelector = regexp.MustCompile(`^(.*/[a-z0-9_]+)\.[A-Z][A-Za-z0-9_]*$`)
	// pathToken is a word that may be a repository path.
	pathToken = regexp.MustCompile(`[A-Za-z0-9_.\-/]+`)
)

// TestCitedPathsExist checks every path cited in Markdown files (links and
// path-like words) and in Go comments.
func TestCitedPathsExist(t *testing.T) {
	root := repoRoot(t)
	c := newChecker(root, trackedFiles(t, root))
	for _, f := range c.docs {
		for _, problem := range c.check(f) {
			t.Error(problem)
		}
	}
}

// checker checks the paths a repository's docs cite.
type checker struct {
	root string
	// topLevel are the repository's top-level folders, "name/": a token
	// that starts with anything else is not taken for a path.
	topLevel []string
	// docs are the files whose citations it checks: every Markdown file,
	// and every Go file but generated code.
	docs []string
}

// newChecker returns the checker of the repository at root, whose files
// (relative to root, with slashes) are files.
func newChecker(root string, files []string) *checker {
	c := &checker{root: root}
	for _, f := range files {
		if dir, _, ok := strings.Cut(f, "/"); ok && !slices.Contains(c.topLevel, dir+"/") {
			c.topLevel = append(c.topLevel, dir+"/")
		}
		if strings.HasSuffix(f, ".md") || strings.HasSuffix(f, ".go") && !strings.Contains(f, "/generated/") && !strings.HasSuffix(f, "_gen.go") {
			c.docs = append(c.docs, f)
		}
	}
	return c
}

// check returns what file cites that does not exist, one line each.
func (c *checker) check(file string) []string {
	root, goComments := c.root, strings.HasSuffix(file, ".go")
	var problems []string
	fh, err := os.Open(filepath.Join(root, file))
	if err != nil {
		return []string{err.Error()}
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// treeBase is, inside a fenced block of a Markdown file, the last path
	// written at the start of a line: a layout tree's indented entries are
	// relative to it.
	treeBase, fenced := "", false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !goComments && strings.HasPrefix(line, "```") {
			fenced, treeBase = !fenced, ""
			continue
		}
		if fenced && line != "" && line[0] != ' ' {
			if p, ok := c.citedPath(strings.Fields(line)[0]); ok {
				treeBase = p
			}
		}
		if goComments {
			i := strings.Index(line, "//")
			if i < 0 || strings.Contains(line[:i], `"`) || strings.HasPrefix(strings.TrimSpace(line[i+2:]), "go:") {
				continue
			}
			line = line[i+2:]
		} else {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				if target == "" || strings.HasPrefix(target, "/") {
					continue
				}
				p := filepath.Join(filepath.Dir(file), target)
				if !exists(root, p) {
					problems = append(problems, fmt.Sprintf("%s:%d: link to %q: %s does not exist", file, n, m[1], p))
				}
			}
		}
		for _, tok := range pathToken.FindAllString(line, -1) {
			p, ok := c.citedPath(tok)
			if ok && !existsNear(root, file, treeBase, p) {
				problems = append(problems, fmt.Sprintf("%s:%d: cites %s, which does not exist", file, n, p))
			}
		}
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", file, err))
	}
	return problems
}

// citedPath reports whether tok reads as a repository path, and returns it
// without trailing punctuation. Patterns (a placeholder, "...", a glob) are
// not paths.
func (c *checker) citedPath(tok string) (string, bool) {
	tok = strings.TrimRight(tok, ".,:;")
	if rootFiles[tok] {
		return tok, true
	}
	for _, prefix := range c.topLevel {
		if strings.HasPrefix(tok, prefix) {
			if strings.Contains(tok, "...") || strings.Contains(tok, "//") {
				return "", false
			}
			tok = strings.TrimSuffix(tok, "/")
			// A Go identifier in a package (plugins/internal/meter.Weight)
			// cites the package.
			if m := goSelector.FindStringSubmatch(tok); m != nil {
				tok = m[1]
			}
			return tok, true
		}
	}
	return "", false
}

// existsNear reports whether p exists from the repository's root, from the
// citing file's folder or one of its parents (a package's comment may name
// its own subfolders), or from base (a layout tree's parent entry).
func existsNear(root, file, base, p string) bool {
	if exists(root, p) || base != "" && exists(root, filepath.Join(base, p)) {
		return true
	}
	for dir := filepath.Dir(file); dir != "." && dir != "/"; dir = filepath.Dir(dir) {
		if exists(root, filepath.Join(dir, p)) {
			return true
		}
	}
	return false
}

func exists(root, p string) bool {
	_, err := os.Stat(filepath.Join(root, p))
	return err == nil
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-co", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(f, "node_modules/") || strings.Contains(f, "/dist/") {
			continue
		}
		files = append(files, f)
	}
	return files
}

// TestTheCheckCoversEveryDoc: the check reads every Markdown file of the
// repository, and by name the ones that cite the most paths: the ABI, the
// ADRs, the examples' READMEs, the architecture page and the READMEs of
// the root and of graph/.
func TestTheCheckCoversEveryDoc(t *testing.T) {
	root := repoRoot(t)
	c := newChecker(root, trackedFiles(t, root))
	var want []string
	for _, pattern := range []string{"README.md", "plugins/ABI.md", "doc/architecture.md", "doc/adr/*.md", "graph/README.md", "graph/web/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("%s matches nothing (%v)", pattern, err)
		}
		want = append(want, m...)
	}
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "node_modules":
			return filepath.SkipDir
		case strings.HasSuffix(p, ".md"):
			want = append(want, p)
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(want), 20)
	for _, p := range want {
		rel, err := filepath.Rel(root, p)
		require.NoError(t, err)
		require.Contains(t, c.docs, filepath.ToSlash(rel), "the check does not read %s", rel)
	}
	for _, top := range []string{"cmd/", "doc/", "engine/", "examples/", "executor/", "graph/", "heartbeat/", "internal/", "plugins/", "pull/", "schedule/", "webhook/"} {
		require.Contains(t, c.topLevel, top, "a path under %s is not recognised as one", top)
	}
}

// TestTheCheckReportsWhatDoesNotExist: a broken link, a path in prose under
// any top-level folder, one in a Go comment and one in a layout tree are
// each reported with their line; what exists (from the root, from the
// citing file's folder, below a tree's entry) and what is not a path are
// not.
func TestTheCheckReportsWhatDoesNotExist(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"README.md": "See [the ADR](doc/adr/0001.md), [gone](doc/gone.md) and [a site](https://example.com/x).\n" +
			"Code: `engine/store.go`, `pull/gone.go`, `executor/`, `webhook/webhook.go`; placeholders: `engine/<name>/x.go`, `plugins/...`.\n" +
			"```\nengine/\n  internal/heap.go\n  internal/nothere.go\n```\n",
		"doc/adr/0001.md":         "Back to [the README](../../README.md), [not here](../architecture.md).\n",
		"engine/store.go":         "package engine\n\n// Store is what schedule/schedule.go and heartbeat/missing.go read.\nvar x = \"not/a/comment.go\"\n",
		"executor/x.go":           "package executor\n",
		"engine/internal/heap.go": "package heap\n",
		"internal/w.go":           "package w\n",
		"pull/pull.go":            "package pull\n",
		"schedule/schedule.go":    "package schedule\n",
		"heartbeat/h.go":          "package heartbeat\n",
		"webhook/webhook.go":      "package webhook\n",
	}
	var names []string
	for name, body := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(body), 0o644))
		names = append(names, name)
	}
	slices.Sort(names)
	c := newChecker(root, names)
	var got []string
	for _, f := range c.docs {
		got = append(got, c.check(f)...)
	}
	require.ElementsMatch(t, []string{
		`README.md:1: link to "doc/gone.md": doc/gone.md does not exist`,
		`README.md:1: cites doc/gone.md, which does not exist`,
		`README.md:2: cites pull/gone.go, which does not exist`,
		`README.md:6: cites internal/nothere.go, which does not exist`,
		`doc/adr/0001.md:1: link to "../architecture.md": doc/architecture.md does not exist`,
		`engine/store.go:3: cites heartbeat/missing.go, which does not exist`,
	}, got)
}
