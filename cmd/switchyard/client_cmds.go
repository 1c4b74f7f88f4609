// The client verbs of the binary — task, watch, lane, plugin, instance
// list|register|remove — talk GraphQL to a running server; their code is in
// internal/cli. Here they are only adapted to the dispatcher of main.go.

package main

import (
	"context"
	"io"
	"slices"

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
