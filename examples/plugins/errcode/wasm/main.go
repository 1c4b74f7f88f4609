// Command wasm is the errcode example as a plugin: stateless, it asks for
// the task's details (the attempt's error code, the task's labels) and
// declares its configuration schema (ABI v2).
package main

import (
	"github.com/switchyard/switchyard/examples/plugins/errcode"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/retry"
)

func init() {
	sdk.ConfigSchema(errcode.Schema)
	retry.Register(errcode.New(), sdk.Stateless, sdk.Details)
}

func main() {}
