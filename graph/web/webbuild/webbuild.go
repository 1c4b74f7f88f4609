// Package webbuild holds what the builds of Switchyard's web apps share:
// webbuild.mjs (imported by each app's build.mjs: input digest, licence
// notice, size report) and, here, the Go side of the input digest, so a
// test can tell that an app's committed dist/ was built from its current
// sources without running node.
package webbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
)

// InputsDigest computes, for the web app whose npm project is in appDir, the
// digest that inputsDigest in webbuild.mjs writes into the app's
// dist/index.html: SHA-256 over build.mjs, package.json, package-lock.json,
// every file under src/ and ../webbuild/webbuild.mjs, each as path NUL bytes NUL, in
// sorted path order (paths relative to appDir, '/'-separated).
func InputsDigest(appDir string) (string, error) {
	files := []string{"build.mjs", "package.json", "package-lock.json"}
	err := filepath.WalkDir(filepath.Join(appDir, "src"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(appDir, path)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("webbuild: list sources of %s: %w", appDir, err)
	}
	// Apps live next to this package (graph/web/<app>/), so webbuild.mjs is
	// at ../webbuild/webbuild.mjs from each of them.
	rel := "../webbuild/webbuild.mjs"
	files = append(files, rel)
	slices.Sort(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(appDir, filepath.FromSlash(f)))
		if err != nil {
			return "", fmt.Errorf("webbuild: digest inputs: %w", err)
		}
		h.Write([]byte(f))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

var recorded = regexp.MustCompile(`<meta name="switchyard-build-inputs" content="([0-9a-f]{64})">`)

// RecordedDigest returns the input digest that a build wrote into its page
// as <meta name="switchyard-build-inputs" content="…">.
func RecordedDigest(page []byte) (string, error) {
	m := recorded.FindSubmatch(page)
	if m == nil {
		return "", errors.New("webbuild: the page records no build-inputs digest")
	}
	return string(m[1]), nil
}
