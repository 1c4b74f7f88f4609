//go:build wasip1

// Command wasm is the wfq example as a plugin. WFQ keeps each agent's
// virtual time between decisions, so it is registered without
// sdk.Stateless.
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/wfq"
	"github.com/switchyard/switchyard/plugins/sdk/fairness"
)

func init() { fairness.Register(&wfq.WFQ{}) }

func main() {}
