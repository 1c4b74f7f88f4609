// Package plugins holds example Switchyard policy plugins. Each Go example
// is a plain Go package with native tests and a wasm/ main package that
// registers it with the guest SDK; asc/ is one written in AssemblyScript.
// go generate builds the modules committed beside this file (the
// AssemblyScript one needs node and npm), plugins_test.go and asc_test.go
// load them into the real host and check that each decides the way its
// README promises, and engine_test.go watches them through the engine.
package plugins

//go:generate sh asc/build.sh
//go:generate go run ../../plugins/internal/wasmgen edf.wasm=./edf/wasm drr.wasm=./drr/wasm jitter.wasm=./jitter/wasm wfq.wasm=./wfq/wasm lanepri.wasm=./lanepri/wasm errclass.wasm=./errclass/wasm vip.wasm=./vip/wasm ratecap.wasm=./ratecap/wasm labelsel.wasm=./labelsel/wasm errcode.wasm=./errcode/wasm
