// Package retry turns a policy.Retry into a Switchyard plugin: call
// Register from the init function of the plugin's main package. Built for
// wasip1, the module exports retry_decide (see plugins/ABI.md); on any other GOOS
// Register only records the policy, so the main package still builds and
// tests natively.
package retry
