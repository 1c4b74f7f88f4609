// `switchyard bench`: see internal/bench.

package main

import (
	"context"
	"io"
	"os"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/bench"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "[flags]", stderr)
	var o bench.Options
	fs.StringVar(&o.Mode, "mode", "submit", "submit (single submitTask), batch (submitTasks of --batch items), e2e (as batch, counting the tasks that succeeded, not those accepted), fanout (subscribers × events/s), mcp (a browser tool call over MCP vs the same action through GraphQL), forward (a real instance's tab read directly vs through the scheduler, alternated) or engine (the engine's Go API: native vs WebAssembly policies)")
	engineTasks := fs.Int("tasks", 300_000, "engine: tasks per throughput run")
	engineFull := fs.Bool("full", false, "engine: also per-dispatch cost at depth, latency at 10k tasks/s and memory per queued task (minutes)")
	fs.StringVar(&o.Server, "server", "", "the GraphQL endpoint of a running server (default: start one in-process, memory store, no-op executor; $SWITCHYARD_SERVER is not read)")
	fs.StringVar(&o.Token, "token", os.Getenv("SWITCHYARD_TOKEN"), "with --server: the API token to send, an operator's or the admin's (default $SWITCHYARD_TOKEN)")
	fs.DurationVar(&o.Duration, "duration", 10e9, "how long to load")
	fs.DurationVar(&o.Warmup, "warmup", 1e9, "load before measuring")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "concurrent requests (default: 64 for submit, 8 for batch, e2e and mcp, 2 for fanout's submitters, 1 for forward)")
	fs.IntVar(&o.Batch, "batch", 100, "items per submitTasks")
	fs.IntVar(&o.Subscribers, "subscribers", 1000, "fanout: subscribers")
	fs.IntVar(&o.Rate, "rate", 1000, "fanout: events per second to generate")
	fs.StringVar(&o.Protocol, "protocol", "graphql-transport-ws", "fanout: graphql-transport-ws or graphql-ws")
	fs.BoolVar(&o.Feed, "feed", false, "fanout: subscribe to taskEventFeed (events encoded once, many per message) instead of taskEvents")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	fs.StringVar(&o.Store, "store", "memory", "the in-process target's store: memory, sqlite (a temporary file) or postgres (a temporary schema)")
	fs.StringVar(&o.DatabaseURL, "database-url", os.Getenv("SWITCHYARD_DATABASE_URL"), "with --store postgres: the database (default $SWITCHYARD_DATABASE_URL)")
	fs.BoolVar(&o.AcceptOnly, "accept-only", false, "the in-process target admits and commits tasks but runs none (its lane is paused): acceptance alone")
	fs.StringVar(&o.Listen, "listen", "", "serve the in-process target (memory store, no-op executor) on this address until interrupted, for a bench in another process (--server)")
	fs.StringVar(&o.InstanceURL, "instance-url", "", "forward with --server: the instance to read from directly (registered with that server)")
	fs.StringVar(&o.InstanceToken, "instance-token", os.Getenv("SWITCHYARD_INSTANCE_TOKEN"), "forward with --server: that instance's token (default $SWITCHYARD_INSTANCE_TOKEN)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole process (client and in-process server) to this file")
	fs.StringVar(&o.MemProfile, "memprofile", "", "write an allocation profile of the whole process (client and in-process server) to this file after the run")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.Mode == "engine" {
		return runEngineBench(ctx, *engineTasks, *engineFull, o.JSON, o.CPUProfile, stdout)
	}
	o.Version = Version()
	return bench.Run(ctx, o, stdout, stderr)
}
