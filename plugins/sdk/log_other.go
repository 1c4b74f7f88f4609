//go:build !wasip1

package sdk

// Log sends a message to the host's log. Outside a plugin (in a policy's
// native tests) it does nothing.
func Log(level int32, msg string) {}
