// Package selection turns a policy.Selection into a Switchyard plugin: call
// Register from the init function of a main package built for wasip1, and
// the module exports selection_rank (see plugins/ABI.md).
package selection
