package authoring

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
func Build(ctx context.Context, dir, out string) error {
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
