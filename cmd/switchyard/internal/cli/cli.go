// Package cli holds the client verbs of the switchyard binary: task
// submit|list|get|cancel|reset|retry, watch, lane, plugin and instance. Each
// talks GraphQL to a running server (graph/client) — the same public API the
// dashboard and any agent use — and nothing else.
//
// The server is --server, else $SWITCHYARD_SERVER, else
// http://127.0.0.1:8080 (a base URL; "/graphql" is added when the URL has no
// path). A token in $SWITCHYARD_TOKEN is sent as `Authorization: Bearer` on
// HTTP and in the WebSocket's connection_init payload.
//
// Exit codes, for scripts:
//
//	0  success
//	1  the server answered with an error not listed below (its code is printed)
//	2  usage: bad flags or arguments, an unreadable or malformed input file
//	3  NOT_FOUND: no such task, lane, instance or plugin
//	4  CONFLICT: the request does not fit the current state (e.g. cancelling an ended task)
//	5  UNAUTHENTICATED or FORBIDDEN: check $SWITCHYARD_TOKEN
//	6  the server could not be reached (nothing was sent: a refused
//	   connection, a name that does not resolve, no connection within
//	   --request-timeout), or did not answer GraphQL
//	7  a bulk submit was partly refused (the refused lines are printed)
//	8  retry later: QUEUE_FULL, DRAINING, UNAVAILABLE, or any error marked
//	   retryable; or the request was sent but no answer came within
//	   --request-timeout (or the connection broke): it may have been
//	   applied, so send it again with the same idempotency key
//
// Errors go to stderr as `switchyard <verb>: CODE: message`; results go to
// stdout, as a table or, with --json, as JSON (one object per line for
// lists and streams).
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/graph/client"
)

// Exit codes; see the package documentation.
const (
	ExitOK          = 0
	ExitAPI         = 1
	ExitUsage       = 2
	ExitNotFound    = 3
	ExitConflict    = 4
	ExitAuth        = 5
	ExitUnreachable = 6
	ExitPartial     = 7
	ExitRetry       = 8
)

// DefaultServer is the server used when neither --server nor
// $SWITCHYARD_SERVER says otherwise.
const DefaultServer = "http://127.0.0.1:8080"

// Error is an error with the exit code the process should end with.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ExitCode returns the process's exit code for this error.
func (e *Error) ExitCode() int { return e.Code }

// Usagef returns a usage error (exit code 2).
func Usagef(format string, args ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// ExitCode maps any error to the exit code documented for it.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var gerrs client.Errors
	if errors.As(err, &gerrs) && len(gerrs) > 0 {
		return codeOf(gerrs[0])
	}
	var gerr *client.Error
	if errors.As(err, &gerr) {
		return codeOf(gerr)
	}
	var status *client.StatusError
	if errors.As(err, &status) {
		if status.Status == http.StatusUnauthorized || status.Status == http.StatusForbidden {
			return ExitAuth
		}
		return ExitUnreachable
	}
	var noAnswer *NoAnswerError
	if errors.As(err, &noAnswer) {
		return ExitRetry // sent, maybe applied: send it again (with its idempotency key)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return ExitUnreachable
	}
	// A local file's error (a path that cannot be written) wraps a system
	// error number, which answers net.Error's methods too: it is not an
	// unreachable server.
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	if errors.As(err, &pathErr) || errors.As(err, &linkErr) {
		return ExitAPI
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return ExitUnreachable
	}
	return ExitAPI
}

func codeOf(e *client.Error) int {
	switch e.Code() {
	case "NOT_FOUND":
		return ExitNotFound
	case "CONFLICT":
		return ExitConflict
	case "UNAUTHENTICATED", "FORBIDDEN":
		return ExitAuth
	case "QUEUE_FULL", "DRAINING", "UNAVAILABLE":
		return ExitRetry
	}
	if r, _ := e.Extensions["retryable"].(bool); r {
		return ExitRetry
	}
	return ExitAPI
}

// withCode attaches the documented exit code to err.
func withCode(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: ExitCode(err), Err: err}
}

// Env is what a verb runs with.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads the environment (os.Getenv in the binary; a map in tests).
	Getenv func(string) string
	// Terminal reports whether stderr is a terminal (progress bars) and
	// stdout is one (colours).
	StderrTerminal, StdoutTerminal bool
}

// OSEnv returns the Env of the process: its streams and environment.
func OSEnv(stdout, stderr io.Writer) Env {
	return Env{
		Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv,
		StderrTerminal: isTerminal(stderr), StdoutTerminal: isTerminal(stdout),
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// conn holds the flags every verb shares: where the server is, and how long
// one request may take.
type conn struct {
	server  string
	timeout time.Duration
	env     Env
}

// DefaultRequestTimeout bounds one request of a verb unless told
// otherwise (--request-timeout). Loading a large plugin compiles it on the server, which can take
// longer on a busy machine.
const DefaultRequestTimeout = 60 * time.Second

func (c *conn) register(fs *flag.FlagSet, env Env) {
	c.env = env
	def := env.Getenv("SWITCHYARD_SERVER")
	if def == "" {
		def = DefaultServer
	}
	fs.StringVar(&c.server, "server", def, "the server's base URL or GraphQL endpoint ($SWITCHYARD_SERVER)")
	fs.DurationVar(&c.timeout, "request-timeout", DefaultRequestTimeout, "how long one request to the server may take")
}

// client returns a GraphQL client of the server, with the token of
// $SWITCHYARD_TOKEN.
func (c *conn) client() (*client.Client, error) {
	endpoint, err := Endpoint(c.server)
	if err != nil {
		return nil, err
	}
	cl := client.New(endpoint)
	if c.timeout <= 0 {
		return nil, Usagef("--request-timeout must be positive, got %s", c.timeout)
	}
	cl.HTTP = &http.Client{Transport: &answerTimeout{base: http.DefaultTransport, timeout: c.timeout}}
	if tok := strings.TrimSpace(c.env.Getenv("SWITCHYARD_TOKEN")); tok != "" {
		cl.Header.Set("Authorization", "Bearer "+tok)
	}
	return cl, nil
}

// Endpoint turns a server address into its GraphQL endpoint: a URL without
// a path gets "/graphql"; a bare host:port gets "http://".
func Endpoint(server string) (string, error) {
	s := strings.TrimSpace(server)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", Usagef("--server %q: want an http(s) URL such as %s", server, DefaultServer)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/graphql"
	}
	return u.String(), nil
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name, usageLine string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet("switchyard "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "Usage: switchyard %s %s\n\nFlags:\n", name, usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags and positional arguments in any order ("get ID
// --json" as well as "get --json ID") and checks the number of positional
// arguments is within [min, max] (max < 0: no limit).
func parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &Error{Code: ExitUsage, Err: err}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minArgs || (maxArgs >= 0 && len(pos) > maxArgs) {
		fs.Usage()
		switch {
		case maxArgs == 0:
			return nil, Usagef("unexpected argument %q", pos[0])
		case len(pos) < minArgs:
			return nil, Usagef("missing argument (want %d, got %d)", minArgs, len(pos))
		default:
			return nil, Usagef("too many arguments (want at most %d, got %d)", maxArgs, len(pos))
		}
	}
	return pos, nil
}

// Subverbs dispatches "switchyard <name> <verb> …" to one of verbs.
func Subverbs(ctx context.Context, name string, verbs []Verb, args []string, env Env) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(env.Stderr, "Usage: switchyard %s <verb> [flags]\n\nVerbs:\n", name)
		for _, v := range verbs {
			fmt.Fprintf(env.Stderr, "  %-9s %s\n", v.Name, v.Summary)
		}
		if len(args) == 0 {
			return Usagef("%s: a verb is required", name)
		}
		return flag.ErrHelp
	}
	for _, v := range verbs {
		if v.Name == args[0] {
			return withCode(v.Run(ctx, args[1:], env))
		}
	}
	return Usagef("%s: unknown verb %q", name, args[0])
}

// Verb is one "switchyard <command> <verb>".
type Verb struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string, env Env) error
}

// multi is a repeatable flag (also taking comma-separated values).
type multi []string

func (m *multi) String() string { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*m = append(*m, p)
		}
	}
	return nil
}

// labels turns k=v pairs into LabelInput objects.
func labels(pairs []string) ([]map[string]any, error) {
	var out []map[string]any
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, Usagef("--label %q: want key=value", p)
		}
		out = append(out, map[string]any{"key": k, "value": v})
	}
	return out, nil
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := marshalJSON(v, "")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// marshalJSON encodes v as the CLI prints JSON: <, > and & as they are
// (json.Marshal's \u003c is for JSON inside HTML, not for a terminal or a
// script), indented by indent when it is not "", without a final newline.
func marshalJSON(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	// Fields carried as raw JSON (a task's params and result) come as the
	// server encoded them, escaped for HTML.
	return unescapeHTML(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// unescapeHTML undoes the escapes of <, > and & (\u003c, \u003e, \u0026)
// in a JSON document encoded for HTML, as the server encodes the event
// feed, leaving every other escape as it is.
func unescapeHTML(doc []byte) []byte {
	if !bytes.Contains(doc, []byte(`\u00`)) {
		return doc
	}
	out := make([]byte, 0, len(doc))
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		if c != '\\' || i+1 >= len(doc) {
			out = append(out, c)
			continue
		}
		if doc[i+1] == 'u' && i+5 < len(doc) {
			switch strings.ToLower(string(doc[i+2 : i+6])) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out, i = append(out, c, doc[i+1]), i+1 // another escape: as it is
	}
	return out
}

// upperList upper-cases comma-separated enum values (states, kinds).
func upperList(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.ToUpper(strings.ReplaceAll(v, "-", "_"))
	}
	return out
}

// enumValues checks the values given to an enum flag (or argument, what)
// against the schema's (all) and returns them as the API spells them
// (drop-oldest → DROP_OLDEST). A value the schema does not have is a usage
// error (exit 2) before anything is sent, not the server's
// GRAPHQL_VALIDATION_FAILED.
func enumValues[T ~string](what string, vs []string, all []T) ([]string, error) {
	out := upperList(vs)
	for i, v := range out {
		if !slices.Contains(all, T(v)) {
			want := make([]string, len(all))
			for j, a := range all {
				want[j] = flagSpelling(string(a))
			}
			return nil, Usagef("%s %q: want %s", what, vs[i], strings.Join(want, ", "))
		}
	}
	return out, nil
}

// enumValue is enumValues for one value.
func enumValue[T ~string](what, v string, all []T) (string, error) {
	out, err := enumValues(what, []string{v}, all)
	if err != nil {
		return "", err
	}
	return out[0], nil
}

// flagSpelling is how flags and the configuration spell an enum value:
// DROP_OLDEST → drop-oldest.
func flagSpelling(v string) string { return strings.ToLower(strings.ReplaceAll(v, "_", "-")) }
