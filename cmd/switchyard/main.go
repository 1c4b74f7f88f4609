// Command switchyard is Switchyard's one binary: the server, the built-in
// browser instance, the command-line client, a load generator and the
// version.
//
//	switchyard serve      run the scheduler and its GraphQL API
//	switchyard instance   run the built-in headless Chromium instance alone;
//	                      instance list|register|remove talk to a server
//	switchyard task       submit|list|get|cancel|reset|retry tasks on a server
//	switchyard watch      follow a server's task events live
//	switchyard lane       list|update|pause|resume a server's lanes
//	switchyard plugin     build, check, benchmark and simulate policy plugins;
//	                      plugin list|load|unload|set talk to a server
//	switchyard bench      load-test an API (a running server, or one in-process), or the engine
//	switchyard token      make API tokens and the hashes the configuration stores
//	switchyard db         check|repair a SQLite file's bookkeeping, offline
//	switchyard version    print the version
//
// The client verbs' --server, --request-timeout and --json may come before
// the command as well as after its verb.
//
// The client verbs' exit codes are documented in internal/cli.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/cli"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// verbs: the command's first argument, when it is not a flag, is a
	// verb (task list, plugin check), after which global flags go.
	verbs bool
}

func commands() []command {
	return []command{
		{"serve", "run the scheduler and its GraphQL API", runServe, false},
		{"instance", "run the built-in Chromium instance alone; list|register|remove a server's instances", runInstanceCommand, true},
		{"task", "submit, list, get, cancel, reset or retry tasks on a server", clientCommand(cli.Task), true},
		{"watch", "follow a server's task events live (filters, resumable with --after)", clientCommand(cli.Watch), false},
		{"lane", "list or change a server's lanes (ceiling, queue cap, pause/resume)", clientCommand(cli.Lane), true},
		{"plugin", "author policy plugins (build, check, bench, simulate); list|load|unload|set a server's", runPluginCommand, true},
		{"bench", "load-test the API (submitTask, submitTasks batches, subscription fan-out) or the engine", runBench, false},
		{"token", "make an API token and its hash for auth.tokens (new), or hash a token (hash)", runToken, true},
		{"db", "check or repair a SQLite database file's bookkeeping (offline)", runDB, true},
		{"version", "print the version", runVersion, false},
	}
}

// errUsage marks an error in the command line: exit status 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal asks for a graceful stop; a second one ends the
		// process at once.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// globalFlags are the flags every client verb takes, which may also come
// before the command (`switchyard --server URL plugin list`), with whether
// each takes a value.
var globalFlags = map[string]bool{"server": true, "request-timeout": true, "json": false}

// hoistGlobalFlags moves the global flags that come before the command to
// after it and its verb, where the verb's own flag set parses them (so one
// given twice is the last one's, as anywhere else): `--server URL plugin
// list` runs as `plugin list --server URL`. Before a command that is not a
// client verb (plugin check, token, version, …), --server and
// --request-timeout are left out (but bench's own --server), so that a
// shell alias that puts them before every command works for those too
// (after the verb they are still refused: there they can only be a
// mistake). Any other flag before the command is a usage error.
func hoistGlobalFlags(args []string, cmds []command) ([]string, error) {
	type given struct {
		name string
		args []string // the flag and, when separate, its value
	}
	var flags []given
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" && args[0] != "-h" && args[0] != "--help" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		takesValue, ok := globalFlags[name]
		if !ok {
			return nil, fmt.Errorf("%w: unknown global flag %s (before the command go only --server, --request-timeout and --json; a command's own flags go after it)", errUsage, args[0])
		}
		n := 1
		if takesValue && !hasValue {
			if len(args) < 2 {
				return nil, fmt.Errorf("%w: global flag %s needs a value", errUsage, args[0])
			}
			n = 2
		}
		flags = append(flags, given{name, args[:n]})
		args = args[n:]
	}
	if len(flags) == 0 || len(args) == 0 {
		return args, nil
	}
	client := talksToServer(args)
	var global []string
	for _, f := range flags {
		if client || f.name == "json" || f.name == "server" && args[0] == "bench" {
			global = append(global, f.args...)
		}
	}
	at := 1 // after the command
	for _, c := range cmds {
		if c.name == args[0] && c.verbs && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
			at = 2 // after its verb
		}
	}
	out := append(slices.Clone(args[:at]), global...)
	return append(out, args[at:]...), nil
}

// talksToServer reports whether the command line args (the command first)
// runs a client verb, which takes --server and --request-timeout: every
// verb of task, watch and lane, and instance's and plugin's client verbs.
// bench is not one, but takes --server of its own (a running server to
// load instead of an in-process one). An unknown command counts as a client
// verb, so that its error is the one the user sees.
func talksToServer(args []string) bool {
	isVerb := func(verbs []cli.Verb) bool {
		return len(args) > 1 && slices.ContainsFunc(verbs, func(v cli.Verb) bool { return v.Name == args[1] })
	}
	switch args[0] {
	case "instance":
		return isVerb(cli.InstanceVerbs())
	case "plugin":
		return isVerb(cli.PluginVerbs())
	case "serve", "token", "db", "version", "bench":
		return false
	}
	return true
}

// run dispatches to a subcommand and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	args, err := hoistGlobalFlags(args, commands())
	if err != nil {
		fmt.Fprintf(stderr, "switchyard: %v\n", err)
		return 2
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var coded interface{ ExitCode() int }
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "switchyard %s: %v\n", c.name, err)
			return 2
		case errors.As(err, &coded):
			// The documented exit codes: the client verbs' (internal/cli),
			// db's for a file in use.
			fmt.Fprintf(stderr, "switchyard %s: %v\n", c.name, err)
			return coded.ExitCode()
		default:
			fmt.Fprintf(stderr, "switchyard %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "switchyard: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Switchyard schedules browser-automation tasks for fleets of agents.")
	fmt.Fprintln(w, "\nUsage: switchyard <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nThe client verbs' --server URL, --request-timeout D and --json may also come before")
	fmt.Fprintln(w, "the command: switchyard --server http://host:8080 plugin list.")
	fmt.Fprintln(w, "\nRun 'switchyard <command> -h' for a command's flags.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name, usageLine string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("switchyard "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: switchyard %s %s\n\nFlags:\n", name, usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, marking errors as usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}
