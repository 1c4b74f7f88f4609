//go:build wasip1

// Command badimport imports a function the host does not offer: the host
// must refuse it at load.
package main

import "unsafe"

var arenaBuf [4096]byte

//go:wasmimport env open_socket
func openSocket() int32

//go:wasmexport abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport arena
func arena(int32) int64 {
	return int64(uintptr(unsafe.Pointer(&arenaBuf[0])))<<32 | int64(len(arenaBuf))
}

//go:wasmexport retry_decide
func decide() int64 { return int64(openSocket()) }

func main() {}
