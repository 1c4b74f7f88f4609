//go:build wasip1

// Command wasm is the lanepri example as a plugin; its answers depend only
// on its input and configuration, so it is registered as stateless.
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/lanepri"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/fairness"
)

func init() { fairness.Register(&lanepri.Policy{}, sdk.Stateless) }

func main() {}
