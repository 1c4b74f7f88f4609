// The client verbs of the binary — task, watch, lane, plugin, instance
// list|register|remove — talk GraphQL to a running server; their code is in
// internal/cli. Here they are only adapted to the dispatcher of main.go.

package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/cli"
)

// clientCommand adapts a cli verb to a command's run function.
func clientCommand(run func(context.Context, []string, cli.Env) error) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return run(ctx, args, cli.OSEnv(stdout, stderr))
	}
}

// runInstanceCommand is `switchyard instance`: with a client verb (list,
// register, remove) it talks to a server; without one it runs the built-in
// browser instance, as before.
func runInstanceCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		i := slices.IndexFunc(cli.InstanceVerbs(), func(v cli.Verb) bool { return v.Name == args[0] })
		if i >= 0 {
			return cli.Subverbs(ctx, "instance", cli.InstanceVerbs(), args, cli.OSEnv(stdout, stderr))
		}
	}
	return runInstance(ctx, args, stdout, stderr)
}

// runPluginCommand is `switchyard plugin`: the authoring tools (build,
// check, bench, simulate; offline) and the client verbs (list, load, unload,
// set; against a server) share the command.
func runPluginCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verbs := cli.PluginVerbs()
	if len(args) > 0 {
		if slices.IndexFunc(verbs, func(v cli.Verb) bool { return v.Name == args[0] }) >= 0 {
			return cli.Subverbs(ctx, "plugin", verbs, args, cli.OSEnv(stdout, stderr))
		}
		if _, ok := pluginToolVerbs[args[0]]; !ok && args[0] != "help" && args[0] != "-h" && args[0] != "--help" {
			return fmt.Errorf("%w: unknown verb %q (%s)", errUsage, args[0], pluginVerbNames(verbs))
		}
	}
	err := runPlugin(ctx, args, stdout, stderr)
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "\nVerbs that talk to a server (--server, $SWITCHYARD_SERVER):")
		for _, v := range verbs {
			fmt.Fprintf(stderr, "  %-9s %s\n", v.Name, v.Summary)
		}
	}
	return err
}

// pluginVerbNames lists every verb of `switchyard plugin`, the offline
// tools then the client verbs, for a usage error: taken from the verb
// tables, so that a new verb cannot be left out.
func pluginVerbNames(client []cli.Verb) string {
	names := make([]string, 0, len(client))
	for _, v := range client {
		names = append(names, v.Name)
	}
	return strings.Join(pluginToolOrder, ", ") + "; " + strings.Join(names, ", ")
}
