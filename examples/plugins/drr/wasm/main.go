//go:build wasip1

// Command wasm is the drr example as a plugin. DRR keeps state between
// decisions, so it is registered without sdk.Stateless.
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/drr"
	"github.com/switchyard/switchyard/plugins/sdk/fairness"
)

func init() { fairness.Register(&drr.DRR{}) }

func main() {}
