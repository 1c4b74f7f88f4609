// Command wasm is the ratecap example as a plugin: stateful, it asks for
// the candidates' names and may hold (ABI v2).
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/ratecap"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/fairness"
)

func init() { fairness.Register(&ratecap.RateCap{}, sdk.Names, sdk.Holds) }

func main() {}
