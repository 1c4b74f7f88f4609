//go:build wasip1

// Command wasm is the jitter example as a plugin.
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/jitter"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/retry"
)

func init() { retry.Register(jitter.Retry{}, sdk.Stateless) }

func main() {}
