//go:build !wasip1

package sdk

// Log sends a message to the host's log at the given level (abi.LogDebug …
// abi.LogError); outside a plugin (in a policy's native tests) it does
// nothing. Keep it off the hot path: each call crosses into the host and
// costs 10,000 units of the decision's fuel.
func Log(level int32, msg string) {}
