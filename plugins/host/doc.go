// Package host runs Switchyard policy plugins: WebAssembly modules that
// implement the ABI in plugins/ABI.md, executed by wazero inside a sandbox.
//
// One Runtime per process compiles each module once (with a file-backed
// compilation cache) and watches every call. A Plugin is one loaded module:
// a small pool of instances, its configuration, a circuit breaker and its
// statistics. The engine never sees any of this: it receives plain
// policy.Selection, policy.Fairness and policy.Retry values from
// Plugin.Selection, Plugin.Fairness and Plugin.Retry, each wrapping the plugin
// around a native fallback policy.
//
// Guards, always on (plugins/ABI.md, "Guards and faults"):
//
//   - every decision has a fuel budget (Config.DecisionFuel): modules are
//     instrumented at load (plugins/internal/meter) so that code pays about
//     one unit per instruction, at function entries, loop headers and
//     branch targets, and bulk memory operations and memory.grow by their
//     length; a guest that runs out traps and its instance is replaced.
//     This replaces wazero's close-on-context-done, which exits to Go at
//     every loop header, and it is deterministic
//     (doc/adr/0002-fuel-metering.md);
//   - every call has a wall-clock deadline (Config.Deadline), enforced by a
//     watchdog goroutine that empties a late call's tank, so that it traps
//     at its next metered point (watchdog.go);
//   - switchyard.log burns fuel (LogFuel), is rate-limited per plugin
//     (Config.LogLines) and sanitised;
//   - memory is capped (Config.MemoryLimitPages);
//   - guests see no filesystem, network, environment, arguments or clock
//     (WASI clocks read zero): time is an argument of each decision;
//   - imports are limited to switchyard.log, switchyard.reason and the
//     process/stdio subset of WASI a language runtime needs to start;
//   - every answer is validated (indices in range, counts within the slots,
//     known retry actions, delays within [0, policy.MaxRetryDelayMs]).
//
// A trap, an exhausted budget, a decision past its deadline, a refused call
// or an invalid answer is a fault: that decision is answered by the fallback
// policy, the fault is counted and reported through Config.OnEvent, and the
// breaker quarantines the plugin (every decision then goes to the fallback)
// on a deadline fault at once, or after repeated faults or too much time
// spent in faulted decisions, for a backoff that doubles up to a cap; then
// the plugin decides again on probation. Plugin.Enable ends a quarantine at
// once.
package host
