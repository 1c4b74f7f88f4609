// Package sdk is the Go guest SDK for Switchyard policy plugins.
//
// The SDK is a Go module of its own, github.com/switchyard/switchyard/plugins/sdk,
// with no dependency outside the standard library and nothing of the server:
// a plugin's module requires only it. Its packages:
//
//   - policy: the decisions' types (policy.Selection, policy.Fairness,
//     policy.Retry and their records), the same types the engine uses;
//   - selection, fairness, retry: Register a policy in its slot;
//   - room: a fairness policy's view of the room left under each ceiling;
//   - schema: the configuration schema a plugin may declare (ConfigSchema);
//   - abi: the byte layout of the ABI (plugins/ABI.md), for tools and tests.
//
// A policy is a plain Go type that implements policy.Selection,
// policy.Fairness or policy.Retry, in an ordinary package with ordinary
// native unit tests. A plugin is a thin main package that registers it with
// the slot's package:
//
//	package main
//
//	import (
//		"example.com/mypolicy"
//		"github.com/switchyard/switchyard/plugins/sdk/fairness"
//	)
//
//	func init() { fairness.Register(&mypolicy.Fair{}) }
//
//	func main() {}
//
// built for wasip1 with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o mypolicy.wasm ./cmd/mypolicy
//
// or `switchyard plugin build ./cmd/mypolicy`. Register exists on every GOOS,
// so the main package builds, vets and tests natively too; only a wasip1
// build exports the ABI's functions. `switchyard plugin new` writes such a
// project.
//
// The slot packages implement the ABI described in plugins/ABI.md: they
// decode the host's records into reused slices, call the policy, and write
// its answer back, without allocating per decision. Registration happens in
// init, which the host runs through _initialize.
//
// A policy that takes configuration implements Configurable, and may
// declare the configuration's schema with ConfigSchema; one whose answers
// do not depend on earlier calls passes Stateless so the host may run it on
// several instances at once. From ABI v2 a policy may ask for the names
// (Names) or the details (Details) behind its records: agents' ids, weights,
// ceilings and labels, lanes' names, tasks' sessions and labels, a retry's
// error code.
package sdk

import (
	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
	"github.com/switchyard/switchyard/plugins/sdk/schema"
)

// ConfigSchema declares the schema the plugin's configuration must satisfy
// (plugins/ABI.md, "Configuration schema"): the host reads it at load
// (the config_schema export) and refuses a configuration that does not
// satisfy it, with an error that names the field, before the policy sees
// it; so does the SDK natively, so a policy's tests see the same errors.
// Call it from the plugin's init, before or after Register. It panics if s
// uses more than the subset the schema package supports.
func ConfigSchema(s *schema.Schema) {
	text, err := s.JSON()
	if err != nil {
		panic("switchyard: " + err.Error())
	}
	guest.Schema, guest.SchemaText = s, text
}

// Configure passes doc to the registered policy as the host does: checked
// against the declared schema (ConfigSchema) first, then handed to the
// policy's Configure. For a plugin's native tests.
func Configure(doc []byte) error { return guest.ConfigureDoc(doc) }

// Configurable is implemented by a policy that takes configuration. The host
// passes the operator's JSON document once after instantiation and again
// whenever it changes. On error the policy must keep its previous settings;
// the error's text reaches the operator.
type Configurable interface {
	Configure(config []byte) error
}

// Option qualifies a registered policy.
type Option uint32

// Stateless declares that the policy's answers depend only on its input and
// configuration, never on earlier calls, so the host may spread concurrent
// decisions over several instances.
const Stateless Option = abi.FlagStateless

// Names (ABI v2) asks the host for the names behind each record: a fairness
// policy's PickContext.Names then gives each candidate's agent id and lane
// name (and policy.Key their stable handles); a policy.DetailedSelection or
// policy.DetailedRetry gets them as its context's Details. Without it the
// host writes no names, at no cost.
const Names Option = abi.FlagNames

// Details (ABI v2, every slot) asks the host for the details behind each
// record: besides the names, the task's session and labels, its agent's
// weight, ceiling and labels, and a retry's error code. A selection policy
// must implement policy.DetailedSelection to see them, a retry policy
// policy.DetailedRetry; a fairness policy finds them in
// PickContext.Details. Without it the host writes none, at no cost.
const Details Option = abi.FlagDetails | abi.FlagNames

// Holds (ABI v2, fairness) declares that the policy may answer
// policy.Hold, so the engine asks it even when a decision has a single
// candidate.
const Holds Option = abi.FlagHolds

// Flags combines options into the value of the policy_flags export.
func Flags(opts []Option) int32 {
	var f int32
	for _, o := range opts {
		f |= int32(o)
	}
	return f
}
