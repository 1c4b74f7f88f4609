// Command wasmgen builds plugin modules for go generate: it builds each Go
// main package into a .wasm file with authoring.Build, twice, and fails if
// the two builds differ, so a committed module is known to be reproducible
// from its sources.
//
//	go run ./plugins/internal/wasmgen OUT.wasm=PKGDIR ...
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchyard/switchyard/plugins/authoring"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wasmgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: wasmgen OUT.wasm=PKGDIR [OUT.wasm=PKGDIR]")
	}
	tmp, err := os.MkdirTemp("", "wasmgen")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, a := range args {
		out, dir, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("argument %q: want OUT.wasm=PKGDIR", a)
		}
		if err := authoring.Build(ctx, dir, out); err != nil {
			return err
		}
		again := filepath.Join(tmp, filepath.Base(out))
		if err := authoring.Build(ctx, dir, again); err != nil {
			return err
		}
		a, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(again)
		if err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("%s: two builds of %s differ: the build is not reproducible", out, dir)
		}
		fmt.Printf("wasmgen: %s from %s (%d bytes, reproducible)\n", out, dir, len(a))
	}
	return nil
}
