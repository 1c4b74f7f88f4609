// Package retry turns a policy.Retry into a Switchyard plugin: call Register
// from the init function of a main package built for wasip1, and the module
// exports retry_decide (see plugins/ABI.md).
package retry
