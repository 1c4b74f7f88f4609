// Package drive chooses how an engine is driven, for the engine's own test
// harnesses (engine/enginetest): a choice that exists for them only, so it
// is not part of the engine's public Options. (Simulations run the decision
// core with no driver: engine.Core.)
package drive

// Synchronous marks opts, an *engine.Options, for an engine driven in its
// callers' goroutines: it starts no goroutine, and every call runs the
// core, dispatches and commits before it returns. With a fake clock and an
// executor that finishes attempts only when told, the engine is then fully
// deterministic. Package engine sets it when it is initialised.
var Synchronous func(opts any)
