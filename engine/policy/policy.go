// Package policy defines the three scheduling decisions that Switchyard
// delegates to swappable policies: selection (the order of tasks within a
// queue), fairness (which queue heads go next) and retry (whether, and when, a
// failed attempt runs again).
//
// The types are defined once, in the plugin SDK's module
// (github.com/switchyard/switchyard/plugins/sdk/policy), so that a plugin
// author's module needs nothing of the server; this package names the same
// types for the engine, so the two can never drift apart. Everything is plain
// numbers: the plugin ABI encodes these structs as fixed-width little-endian
// records, and the guest SDK decodes them back.
package policy

import sdk "github.com/switchyard/switchyard/plugins/sdk/policy"

// The types, constants and functions below are those of the SDK's policy
// package; see its documentation.
type (
	Slot          = sdk.Slot
	Task          = sdk.Task
	Selection     = sdk.Selection
	Candidate     = sdk.Candidate
	PickContext   = sdk.PickContext
	Fairness      = sdk.Fairness
	StateReporter = sdk.StateReporter
	ErrorClass    = sdk.ErrorClass
	Failure       = sdk.Failure
	Action        = sdk.Action
	Decision      = sdk.Decision
	Retry         = sdk.Retry
	Inline        = sdk.Inline
	Names         = sdk.Names
	Holder        = sdk.Holder
	Policy        = sdk.Policy

	Details           = sdk.Details
	AgentInfo         = sdk.AgentInfo
	Labels            = sdk.Labels
	RankContext       = sdk.RankContext
	RetryContext      = sdk.RetryContext
	DetailedSelection = sdk.DetailedSelection
	DetailedRetry     = sdk.DetailedRetry
)

// MakeLabels returns the labels of m; see sdk.MakeLabels.
func MakeLabels(m map[string]string) Labels { return sdk.MakeLabels(m) }

// Slots.
const (
	SlotSelection = sdk.SlotSelection
	SlotFairness  = sdk.SlotFairness
	SlotRetry     = sdk.SlotRetry
)

// Task flags.
const (
	TaskHasTab      = sdk.TaskHasTab
	TaskInstruction = sdk.TaskInstruction
	TaskInterrupt   = sdk.TaskInterrupt
)

// PickDryRun marks a decision made for a plan; see sdk.PickDryRun.
const PickDryRun = sdk.PickDryRun

// Error classes.
const (
	ClassNone      = sdk.ClassNone
	ClassTransient = sdk.ClassTransient
	ClassPermanent = sdk.ClassPermanent
	ClassCancelled = sdk.ClassCancelled
)

// FailureJitter is set when the task's retry policy asks for jitter.
const FailureJitter = sdk.FailureJitter

// Retry actions.
const (
	ActionRetry = sdk.ActionRetry
	ActionPark  = sdk.ActionPark
	ActionFail  = sdk.ActionFail
)

// MaxRetryDelayMs bounds any retry delay a policy may ask for.
const MaxRetryDelayMs = sdk.MaxRetryDelayMs

// ParseSlot returns the slot named s.
func ParseSlot(s string) (Slot, bool) { return sdk.ParseSlot(s) }

// Valid reports whether d is a well-formed decision.
func Valid(d Decision) bool { return sdk.Valid(d) }

// DetailUser is implemented by a policy that can tell whether its decisions
// read names or details at all (Names, Details; a WebAssembly module
// declares it when it loads). The engine copies them, for a decision made
// outside its lock, only for a policy that reads them or does not say.
type DetailUser interface {
	UsesDetails() bool
}

// UsesDetails reports whether p's decisions may read names or details.
func UsesDetails(p any) bool {
	u, ok := p.(DetailUser)
	return !ok || u.UsesDetails()
}

// IsInline reports whether p may decide under the engine's lock.
func IsInline(p any) bool { return sdk.IsInline(p) }

// MaxHoldHintMs is the longest re-ask hint a fairness hold may carry.
const MaxHoldHintMs = sdk.MaxHoldHintMs

// Hold is a fairness policy's "hold" answer; see sdk.Hold.
func Hold(hintMs int64) int { return sdk.Hold(hintMs) }

// HoldHint reports whether a Pick's answer is a hold, and its hint.
func HoldHint(n int) (int64, bool) { return sdk.HoldHint(n) }

// Key returns the stable handle of an agent id or lane name; see sdk.Key.
func Key(name string) uint64 { return sdk.Key(name) }

// ExplainedRetry is a retry policy that says, with each decision, whether
// a native fallback made it in its place, and why: a WebAssembly plugin's
// wrapper answers through the native policy of its slot when the plugin
// faults, is quarantined or disabled, or could not be asked. fellBack is
// "" when the policy decided, else the reason, for people ("it faulted:
// trap: …"). The engine records it in the task's reason, so that a
// decision the fallback made is not put down to the policy.
type ExplainedRetry interface {
	DecideExplained(ctx RetryContext, f Failure) (d Decision, fellBack string)
}

// ExplainedFairness is ExplainedRetry for fairness: PickExplained answers
// as Pick does, and says whether a native fallback picked in its place,
// and why.
type ExplainedFairness interface {
	PickExplained(ctx PickContext, cands []Candidate, picks []uint32) (n int, fellBack string)
}
