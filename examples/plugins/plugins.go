// Package plugins holds example Switchyard policy plugins. Each example is a
// plain Go package with native tests and a wasm/ main package that registers
// it with the guest SDK; go generate builds the modules committed beside this
// file, and plugins_test.go loads them into the real host and checks that
// each decides the way its README promises.
package plugins

//go:generate go run ../../plugins/internal/wasmgen edf.wasm=./edf/wasm drr.wasm=./drr/wasm jitter.wasm=./jitter/wasm wfq.wasm=./wfq/wasm lanepri.wasm=./lanepri/wasm errclass.wasm=./errclass/wasm
