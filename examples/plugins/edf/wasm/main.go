//go:build wasip1

// Command wasm is the edf example as a plugin.
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/edf"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/selection"
)

func init() { selection.Register(edf.Selection{}, sdk.Stateless) }

func main() {}
