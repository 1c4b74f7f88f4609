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
// Guards, always on:
//
//   - every decision has a budget (Config.DecisionFuel): modules are
//     instrumented at load so that every function entry and loop header
//     burns fuel, and bulk memory operations by their length, and a guest
//     that runs out traps and its instance is replaced. This replaces wazero's close-on-context-done, which costs
//     about 45 ns per loop header here (and Go's WebAssembly code passes one
//     for most taken branches) against no measurable cost for the fuel
//     check, and it is deterministic (doc/adr/0002-fuel-metering.md);
//   - memory is capped (Config.MemoryLimitPages);
//   - guests see no filesystem, network, environment, arguments or clock
//     (WASI clocks read zero): time is an argument of each decision;
//   - imports are limited to switchyard.log, switchyard.reason and the
//     process/stdio subset of WASI a language runtime needs to start;
//   - every answer is validated (indices in range, counts within the slots,
//     known retry actions, delays within [0, policy.MaxRetryDelayMs]).
//
// A trap, an exhausted budget, a refused call or an invalid answer is a fault: that
// decision is answered by the fallback policy, the fault is counted and
// reported through Config.OnEvent, and repeated faults trip the breaker,
// which disables the plugin (every decision then goes to the fallback) until
// Plugin.Enable.
package host
