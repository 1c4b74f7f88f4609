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
	"syscall"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/cli"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the scheduler and its GraphQL API", runServe},
		{"instance", "run the built-in Chromium instance alone; list|register|remove a server's instances", runInstanceCommand},
		{"task", "submit, list, get, cancel, reset or retry tasks on a server", clientCommand(cli.Task)},
		{"watch", "follow a server's task events live (filters, resumable with --after)", clientCommand(cli.Watch)},
		{"lane", "list or change a server's lanes (ceiling, queue cap, pause/resume)", clientCommand(cli.Lane)},
		{"plugin", "author policy plugins (build, check, bench, simulate); list|load|unload|set a server's", runPluginCommand},
		{"bench", "load-test the API (submitTask, submitTasks batches, subscription fan-out) or the engine", runBench},
		{"token", "make an API token and its hash for auth.tokens (new), or hash a token (hash)", runToken},
		{"db", "check or repair a SQLite database file's bookkeeping (offline)", runDB},
		{"version", "print the version", runVersion},
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

// run dispatches to a subcommand and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
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
