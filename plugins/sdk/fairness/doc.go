// Package fairness turns a policy.Fairness into a Switchyard plugin: call
// Register from the init function of the plugin's main package. Built for
// wasip1, the module exports fairness_pick (see plugins/ABI.md); on any other GOOS
// Register only records the policy, so the main package still builds and
// tests natively.
package fairness
