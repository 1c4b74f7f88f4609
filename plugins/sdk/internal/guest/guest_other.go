//go:build !wasip1

package guest

// LastReason is the last reason a call gave for refusing, outside a plugin
// (the host's reason import, inside one).
var LastReason string

// Reason records why the current call is refused.
func Reason(msg string) { LastReason = msg }

// Log does nothing outside a plugin.
func Log(level int32, msg string) {}
