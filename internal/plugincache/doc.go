// Package plugincache fills the plugin host's compilation caches before
// the tests run, so that the tests' -race binaries, whose WebAssembly
// compiler runs several times slower, find the modules they load
// compiled. It has no code of its own: its test does the work when run
// with -warm, and skips otherwise. CI runs it before the tests:
//
//	go test -count=1 -run '^TestWarmPluginCaches$' ./internal/plugincache -args -warm
package plugincache
