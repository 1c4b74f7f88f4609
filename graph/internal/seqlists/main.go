// Command seqlists points chosen list marshallers of gqlgen's generated code
// at model.MarshalList, which marshals a shallow selection of the list in
// place instead of on a goroutine per element (graph/model/list.go; ADR
// 0005, finding 13). gqlgen v0.17 has no setting for it. `go generate
// ./graph` runs it after gqlgen:
//
//	seqlists FILE FUNC...
//
// rewrites, in FILE, the one graphql.MarshalSliceConcurrently call of each
// function FUNC (a method of executionContext, named by its full name or
// a prefix of it). It fails, and changes nothing, if a function or its call
// is missing, so that a gqlgen that generates otherwise is noticed; a call
// already rewritten is left as it is.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
)

const (
	concurrent = "graphql.MarshalSliceConcurrently(ctx, "
	inPlace    = "model.MarshalList(ctx, sel, "
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: seqlists FILE FUNC...")
		os.Exit(2)
	}
	if err := rewrite(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "seqlists:", err)
		os.Exit(1)
	}
}

func rewrite(file string, funcs []string) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading the generated code: %w", err)
	}
	for _, name := range funcs {
		head := []byte("\nfunc (ec *executionContext) " + name)
		start := bytes.Index(src, head)
		if start < 0 || bytes.Contains(src[start+1:], head) {
			return fmt.Errorf("%s: not one function %s…", file, name)
		}
		end := bytes.Index(src[start+1:], []byte("\n}\n"))
		if end < 0 {
			return fmt.Errorf("%s: %s has no end", file, name)
		}
		body := src[start : start+1+end]
		switch n, done := bytes.Count(body, []byte(concurrent)), bytes.Count(body, []byte(inPlace)); {
		case n == 0 && done == 1:
			continue
		case n != 1 || done != 0:
			return fmt.Errorf("%s: %s makes %d calls to %s…), want one", file, name, n, concurrent)
		}
		i := start + bytes.Index(body, []byte(concurrent))
		src = append(src[:i:i], append([]byte(inPlace), src[i+len(concurrent):]...)...)
	}
	out, err := format.Source(src)
	if err != nil {
		return fmt.Errorf("%s: the rewritten code does not parse: %w", file, err)
	}
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return fmt.Errorf("writing the generated code: %w", err)
	}
	return nil
}
