//go:build wasip1

// Command backoff is the built-in retry policy (engine/policy/backoff) as a
// plugin: the same Go package the engine runs natively, registered with the
// guest SDK. plugins/builtin embeds the module that go generate builds here.
package main

import (
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/retry"
)

func init() { retry.Register(backoff.Retry{}, sdk.Stateless) }

func main() {}
