// Command wasm is the vip example as a plugin: stateless, and it asks for
// the candidates' names (ABI v2).
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/vip"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/fairness"
)

func init() { fairness.Register(&vip.VIP{}, sdk.Stateless, sdk.Names) }

func main() {}
