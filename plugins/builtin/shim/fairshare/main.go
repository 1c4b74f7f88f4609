//go:build wasip1

// Command fairshare is the built-in fairness policy (engine/policy/fairshare) as a
// plugin: the same Go package the engine runs natively, registered with the
// guest SDK. plugins/builtin embeds the module that go generate builds here.
package main

import (
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/fairness"
)

func init() { fairness.Register(&fairshare.Fairness{}, sdk.Stateless) }

func main() {}
