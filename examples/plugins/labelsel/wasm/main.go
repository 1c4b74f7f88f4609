// Command wasm is the labelsel example as a plugin: stateless, it asks for
// the tasks' details and declares its configuration schema (ABI v2).
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/labelsel"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/selection"
)

func init() {
	sdk.ConfigSchema(labelsel.Schema)
	selection.Register(labelsel.New(), sdk.Stateless, sdk.Details)
}

func main() {}
