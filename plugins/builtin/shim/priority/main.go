//go:build wasip1

// Command priority is the built-in selection policy (engine/policy/priority) as a
// plugin: the same Go package the engine runs natively, registered with the
// guest SDK. plugins/builtin embeds the module that go generate builds here.
package main

import (
	"github.com/switchyard/switchyard/engine/policy/priority"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/selection"
)

func init() { selection.Register(priority.Selection{}, sdk.Stateless) }

func main() {}
