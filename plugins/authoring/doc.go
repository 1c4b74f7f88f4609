// Package authoring is the library behind `switchyard plugin new | build |
// check | bench | simulate`: it writes a new policy project from the
// templates of scaffold/ (New), builds a Go policy into a plugin module (Build),
// checks a module against the ABI and a conformance suite (Check), measures
// its decisions against the native built-in of the same slot (Bench), and
// replays a workload through the engine under the plugin and under the
// built-in policies (Simulate). Each returns a report that prints for people
// (String) and marshals to JSON for machines; the CLI only parses flags.
//
//	rep, err := authoring.Check(ctx, wasm, authoring.Options{Config: cfg})
//	if err != nil { ... }           // the checks could not run
//	fmt.Print(rep)                  // or json.Marshal(rep)
//	if !rep.Passed { os.Exit(1) }
//
// Options.Runtime lets a caller share one host.Runtime (and so its compiled
// modules) across calls; without it each call starts a private runtime with
// the default host configuration and its file-backed compilation cache,
// but for the deadline: a minute for Check and Simulate, which judge fuel
// rather than wall time (and so does their breaker: the wall time faulted
// decisions may cost before a quarantine is a minute too), and the
// server's for Bench (BenchOptions.Deadline).
package authoring
