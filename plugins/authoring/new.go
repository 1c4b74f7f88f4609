// New: the scaffold behind `switchyard plugin new`.

package authoring

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"unicode"

	"golang.org/x/mod/module"
)

//go:embed scaffold
var scaffold embed.FS

// SDKModule is the Go SDK's module path.
const SDKModule = "github.com/switchyard/switchyard/plugins/sdk"

// NewOptions configure New.
type NewOptions struct {
	// Slot is "selection", "fairness" or "retry".
	Slot string
	// Lang is "go" (the default) or "assemblyscript".
	Lang string
	// Module is the Go module path of the new project (default
	// example.com/ and the directory's base name).
	Module string
	// SDK is the directory of the Go SDK (plugins/sdk of a Switchyard
	// checkout), which the project's go.mod points at with a replace
	// directive; required for Go.
	SDK string
}

// ErrExists is returned by New for a directory that exists and is not empty.
var ErrExists = errors.New("the directory exists and is not empty")

// ErrName is returned by New (and CheckName) for a project directory whose
// name is not a plugin's, or a --module that is not a module path.
var ErrName = errors.New("not a valid name")

// NameRule says which names a project directory may have: its name names
// the Go module (example.com/NAME), the npm package, the .wasm file and
// the plugin on the server.
const NameRule = "letters, digits, '-' and '_', starting with a letter or a digit, at most 64 (AssemblyScript: lower-case letters, as npm takes them), as a plugin's name on the server"

// CheckName reports whether name, a project directory's base name, can
// name a plugin project in lang, and why not.
func CheckName(name, lang string) error {
	ok := name != "" && len(name) <= 64
	for i, r := range name {
		lower := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		upper := r >= 'A' && r <= 'Z' && lang != "assemblyscript"
		if !lower && !upper && (i == 0 || r != '-' && r != '_') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("plugin new: %q is %w for a plugin project (its directory's name names the module, the .wasm file and the plugin): use %s", name, ErrName, NameRule)
	}
	return nil
}

// New writes a plugin project for opts.Slot into dir: for Go, a policy
// package with native tests and a main package (wasm/) that registers it
// with the SDK; for AssemblyScript, a package.json, the compiler options, the
// policy and node tests. The project builds, tests and passes Check as
// written. dir must not exist, or be empty.
func New(dir string, opts NewOptions) ([]string, error) {
	if opts.Lang == "" {
		opts.Lang = "go"
	}
	ifaces := map[string]string{"selection": "Selection", "fairness": "Fairness", "retry": "Retry"}
	iface, ok := ifaces[opts.Slot]
	switch {
	case !ok:
		return nil, fmt.Errorf("plugin new: unknown slot %q (selection, fairness or retry)", opts.Slot)
	case opts.Lang != "go" && opts.Lang != "assemblyscript":
		return nil, fmt.Errorf("plugin new: unknown language %q (go or assemblyscript)", opts.Lang)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("plugin new %s: %w", dir, ErrExists)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin new: %w", err)
	}
	name := filepath.Base(abs)
	if err := CheckName(name, opts.Lang); err != nil {
		return nil, err
	}
	if opts.Lang == "go" && opts.Module != "" {
		if err := module.CheckPath(opts.Module); err != nil {
			return nil, fmt.Errorf("plugin new: --module %q is %w: %v", opts.Module, ErrName, err)
		}
	}
	data := map[string]string{"Name": name, "Slot": opts.Slot, "Iface": iface, "Package": goPackageName(name)}
	if opts.Lang == "go" {
		if opts.SDK == "" {
			return nil, errors.New("plugin new: the Go SDK's directory is required (plugins/sdk of a Switchyard checkout): the SDK has no published version yet")
		}
		sdk, err := filepath.Abs(opts.SDK)
		if err != nil {
			return nil, fmt.Errorf("plugin new: %w", err)
		}
		mod, err := os.ReadFile(filepath.Join(sdk, "go.mod"))
		if err != nil || !bytes.HasPrefix(mod, []byte("module "+SDKModule+"\n")) {
			return nil, fmt.Errorf("plugin new: %s is not the Switchyard Go SDK (its go.mod must declare module %s)", opts.SDK, SDKModule)
		}
		data["SDK"] = filepath.ToSlash(sdk)
		data["Module"] = opts.Module
		if data["Module"] == "" {
			data["Module"] = "example.com/" + name
		}
	}
	files := map[string]string{} // path in the project -> template
	root := "scaffold/" + opts.Lang
	err = fs.WalkDir(scaffold, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl")
		switch {
		case strings.HasPrefix(rel, "policy_test_"): // Go: one test per slot
			if rel != "policy_test_"+opts.Slot+".go" {
				return nil
			}
			rel = "policy_test.go"
		case strings.HasPrefix(rel, "policy_"):
			if rel != "policy_"+opts.Slot+".go" {
				return nil
			}
			rel = "policy.go"
		case strings.HasPrefix(rel, "assembly/"): // AssemblyScript: preamble + slot
			return nil
		case rel == "gitignore":
			rel = ".gitignore"
		}
		files[rel] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("plugin new: %w", err)
	}
	out := map[string][]byte{}
	for rel, p := range files {
		b, err := render(p, data)
		if err != nil {
			return nil, err
		}
		out[rel] = b
	}
	if opts.Lang == "assemblyscript" {
		pre, err := render(root+"/assembly/preamble.ts.tmpl", data)
		if err != nil {
			return nil, err
		}
		slot, err := render(root+"/assembly/"+opts.Slot+".ts.tmpl", data)
		if err != nil {
			return nil, err
		}
		out["assembly/index.ts"] = append(pre, slot...)
	}
	var written []string
	for rel, b := range out {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("plugin new: %w", err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, fmt.Errorf("plugin new: %w", err)
		}
		written = append(written, rel)
	}
	slices.Sort(written)
	return written, nil
}

func render(p string, data map[string]string) ([]byte, error) {
	t, err := template.New(path.Base(p)).ParseFS(scaffold, p)
	if err != nil {
		return nil, fmt.Errorf("plugin new: template %s: %w", p, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("plugin new: template %s: %w", p, err)
	}
	return b.Bytes(), nil
}

// goPackageName makes a Go package name from a directory's name: lower-case
// letters and digits, starting with a letter.
func goPackageName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) && b.Len() > 0) {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "policy"
	}
	return b.String()
}

// FindSDK looks for the Go SDK (plugins/sdk) in the Switchyard checkout that
// holds dir, if any, and returns its directory.
func FindSDK(dir string) (string, bool) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for {
		p := filepath.Join(d, "plugins", "sdk")
		if mod, err := os.ReadFile(filepath.Join(p, "go.mod")); err == nil && bytes.HasPrefix(mod, []byte("module "+SDKModule+"\n")) {
			return p, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", false
		}
		d = parent
	}
}
