package host

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
)

// ErrInvalid marks a module refused at load: wrong ABI version, a missing or
// mistyped export, an import that plugins are not offered, a configuration
// the guest rejects, or a failed smoke decision. The API maps it to
// PLUGIN_INVALID.
var ErrInvalid = errors.New("invalid plugin")

// ConfigError is a configuration document refused, at load or later: by
// the module's schema (Err then wraps a *schema.Error that names the
// field), by the module's own configure (Err says why; a *ConfigureFault
// when configure faulted under the document rather than refusing it), or, at load, by a
// smoke decision that faulted under the document where the module, under
// no configuration, makes it or refuses to go without one (Err is then the
// *SmokeError). It is also ErrInvalid, as a load it stops is refused.
type ConfigError struct {
	Err error
	// Slot, Version, Stateless and Schema describe the module that refused
	// the document, as far as it was read before: its slot, the ABI
	// version it declares, whether it declares itself stateless and the
	// text of the configuration schema it declares (nil for none). A tool
	// that reports the refusal shows the schema with it.
	Slot      policy.Slot
	Version   int32
	Stateless bool
	Schema    []byte
}

func (e *ConfigError) Error() string {
	var se *SmokeError
	if errors.As(e.Err, &se) {
		return fmt.Sprintf("%v: smoke decision: %s: %s, under this configuration (the module is not at fault: without one it makes the decision or asks for a configuration)", ErrInvalid, se.Kind, se.Reason)
	}
	var cf *ConfigureFault
	if errors.As(e.Err, &cf) {
		return fmt.Sprintf("%v: %v", ErrInvalid, cf)
	}
	return ErrInvalid.Error() + ": configure: " + e.Err.Error()
}

// ConfigureFault is a configure call that faulted under the document it
// was given — it trapped, or ran out of its SetupFuel or its time — rather
// than refusing it with a reason, as the Err of the *ConfigError that
// refuses the document (the module, under no configuration, did not fault:
// the document is at fault). Reason is the fault's, with the setup budget
// it ran out of.
type ConfigureFault struct {
	Kind   FaultKind
	Reason string
}

func (e *ConfigureFault) Error() string {
	return fmt.Sprintf("configure faulted under this configuration: %s: %s", e.Kind, e.Reason)
}

// Unwrap returns ErrInvalid and the reason.
func (e *ConfigError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// InitDeadlineError is a module whose initialisation (its start function
// or _initialize) was still running at the wall-clock bound of the calls
// that set an instance up, and was stopped there. At load the module is
// refused (the load's error wraps ErrInvalid too); an instance being
// rebuilt is not made, and the plugin is disabled with this reason.
type InitDeadlineError struct {
	Bound  time.Duration // the bound it ran past
	Export string        // what ran: _initialize, or the start function (switchyard_start)
}

func (e *InitDeadlineError) Error() string {
	return fmt.Sprintf("initialisation exceeded %d ms (%s was stopped there)", e.Bound.Milliseconds(), e.Export)
}

// SmokeError is a smoke decision (one decision on synthetic input, made
// under the plugin's configuration) that faulted: at load, where it
// refuses the module (or, as the Err of a *ConfigError, the configuration
// the load was given), or by Plugin.Trial, where it refuses the new
// configuration. It is also ErrInvalid.
type SmokeError struct {
	Kind   FaultKind
	Reason string
}

func (e *SmokeError) Error() string {
	return fmt.Sprintf("%v: smoke decision: %s: %s", ErrInvalid, e.Kind, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *SmokeError) Unwrap() error { return ErrInvalid }

// ErrClosed is returned by a closed plugin or runtime.
var ErrClosed = errors.New("plugin closed")

// FaultKind classifies a decision that the plugin failed to make.
type FaultKind uint8

// Fault kinds.
const (
	FaultTrap    FaultKind = 1 // the guest trapped or exited: a Go panic, out of memory, unreachable
	FaultBudget  FaultKind = 2 // the decision ran out of fuel (Config.DecisionFuel): an endless or far too long loop
	FaultInvalid FaultKind = 3 // the answer broke the contract: index or count out of range, bad retry action or delay
	FaultRefused FaultKind = 4 // the guest returned an error code (see the event's reason)
	// FaultDeadline: the decision ran past Config.Deadline and was
	// abandoned; the plugin is quarantined at once.
	FaultDeadline FaultKind = 5
)

// FaultKinds lists every fault kind, in order.
var FaultKinds = []FaultKind{FaultTrap, FaultBudget, FaultInvalid, FaultRefused, FaultDeadline}

// String returns the kind's lower-case name, as used in metrics.
func (k FaultKind) String() string {
	switch k {
	case FaultTrap:
		return "trap"
	case FaultBudget:
		return "fuel"
	case FaultInvalid:
		return "invalid"
	case FaultRefused:
		return "refused"
	case FaultDeadline:
		return "deadline"
	}
	return "unknown"
}

// EventKind says what happened to a plugin.
type EventKind uint8

// Event kinds.
const (
	EventFault    EventKind = 1 // a decision faulted and fell back
	EventDisabled EventKind = 2 // an instance could not be rebuilt: the fallback decides until Plugin.Enable
	EventEnabled  EventKind = 3 // Plugin.Enable re-enabled the plugin, or its quarantine ended and it is on probation
	// EventQuarantined: the breaker quarantined the plugin (Event.Reason
	// says why and for how long, Event.Until until when).
	EventQuarantined EventKind = 4
)

// String returns the kind's lower-case name.
func (k EventKind) String() string {
	switch k {
	case EventFault:
		return "fault"
	case EventDisabled:
		return "disabled"
	case EventEnabled:
		return "enabled"
	case EventQuarantined:
		return "quarantined"
	}
	return "unknown"
}

// Event reports a fault or a breaker change.
type Event struct {
	Plugin string
	Slot   policy.Slot // the decision the plugin makes
	Kind   EventKind
	Fault  FaultKind // for EventFault
	Reason string
	Time   time.Time
	Until  time.Time // for EventQuarantined: when the quarantine ends and probation begins
}
