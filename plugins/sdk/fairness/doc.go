// Package fairness turns a policy.Fairness into a Switchyard plugin: call
// Register from the init function of a main package built for wasip1, and
// the module exports fairness_pick (see plugins/ABI.md).
package fairness
