package authoring

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildFlags are the go build flags that make a plugin: a WASI reactor
// (-buildmode=c-shared, so the host runs _initialize and then calls exports)
// built reproducibly (-trimpath, no VCS stamp) and without the symbol table.
var BuildFlags = []string{"-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-ldflags=-s -w"}

// Build compiles the Go main package in dir (a directory or an import path
// pattern such as ./cmd/myplugin) into a plugin module written to out, with
// the standard toolchain: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
// The build runs in dir's module, so dir may live outside this repository.
// Two builds of the same sources with the same toolchain give identical bytes.
//
// dir must hold a main package: a directory of a library package, or of no
// Go package, is refused before the build, naming a main package below it
// when there is one (the layout `switchyard plugin new` writes keeps it in
// wasm/).
func Build(ctx context.Context, dir, out string) error {
	if err := checkMain(dir); err != nil {
		return err
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("build plugin: %w", err)
	}
	args := append([]string{"build"}, BuildFlags...)
	args = append(args, "-o", absOut, ".")
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build plugin %s: %w\n%s", dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// goTool returns the go command of the running toolchain when it can be
// found, so that a build from a test or go generate uses the same Go.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// DefaultOutput is where Build's module goes when no output is named: dir
// with .wasm appended, or for a directory named wasm (the main package of a
// policy kept beside it) its parent's name with .wasm appended, so that
// ./drr/wasm gives ./drr.wasm.
func DefaultOutput(dir string) string {
	d := filepath.Clean(dir)
	if filepath.Base(d) == "wasm" {
		d = filepath.Dir(d)
	}
	if d == "." || d == string(filepath.Separator) {
		if abs, err := filepath.Abs(d); err == nil {
			return filepath.Base(abs) + ".wasm"
		}
		return "plugin.wasm"
	}
	return d + ".wasm"
}

// ErrNotMain is wrapped by Build's error for a directory that holds no main
// package.
var ErrNotMain = errors.New("not a main package")

// checkMain reports whether dir's Go files (tests aside) are package main.
func checkMain(dir string) error {
	pkg, err := packageName(dir)
	if err != nil {
		return fmt.Errorf("build plugin %s: %w", dir, err)
	}
	if pkg == "main" {
		return nil
	}
	what := "no Go package"
	if pkg != "" {
		what = "package " + pkg
	}
	hint := "give the directory of the plugin's main package, which registers the policy with the SDK"
	if sub, _ := packageName(filepath.Join(dir, "wasm")); sub == "main" {
		hint = "did you mean " + filepath.Join(dir, "wasm") + "?"
	}
	return fmt.Errorf("build plugin %s: %w: it holds %s; %s", dir, ErrNotMain, what, hint)
}

// packageName returns the package clause of dir's non-test Go files, "" when
// it has none.
func packageName(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); err != nil {
		return "", err
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			return "", err
		}
		return af.Name.Name, nil
	}
	return "", nil
}
