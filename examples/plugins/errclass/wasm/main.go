//go:build wasip1

// Command wasm is the errclass example as a plugin.
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/errclass"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/retry"
)

func init() { retry.Register(&errclass.Retry{}, sdk.Stateless) }

func main() {}
