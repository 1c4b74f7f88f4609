package doccheck

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// topLevel are the repository's top-level entries a cited path may start
// with; a token that starts with anything else is not taken for a path.
var topLevel = []string{"cmd/", "engine/", "plugins/", "graph/", "examples/", "internal/", "doc/", ".ci/"}

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
	files := trackedFiles(t, root)
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, ".md"):
			checkFile(t, root, f, false)
		case strings.HasSuffix(f, ".go") && !strings.Contains(f, "/generated/") && !strings.HasSuffix(f, "_gen.go"):
			checkFile(t, root, f, true)
		}
	}
}

func checkFile(t *testing.T, root, file string, goComments bool) {
	t.Helper()
	fh, err := os.Open(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
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
			if p, ok := citedPath(strings.Fields(line)[0]); ok {
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
					t.Errorf("%s:%d: link to %q: %s does not exist", file, n, m[1], p)
				}
			}
		}
		for _, tok := range pathToken.FindAllString(line, -1) {
			p, ok := citedPath(tok)
			if ok && !existsNear(root, file, treeBase, p) {
				t.Errorf("%s:%d: cites %s, which does not exist", file, n, p)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// citedPath reports whether tok reads as a repository path, and returns it
// without trailing punctuation. Patterns (a placeholder, "...", a glob) are
// not paths.
func citedPath(tok string) (string, bool) {
	tok = strings.TrimRight(tok, ".,:;")
	if rootFiles[tok] {
		return tok, true
	}
	for _, prefix := range topLevel {
		if strings.HasPrefix(tok, prefix) && len(tok) > len(prefix) {
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
