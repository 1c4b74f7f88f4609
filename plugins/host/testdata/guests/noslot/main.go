//go:build wasip1

// Command noslot speaks the ABI but fills no slot: the host must refuse it.
package main

import "unsafe"

var arenaBuf [4096]byte

//go:wasmexport abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport arena
func arena(int32) int64 {
	return int64(uintptr(unsafe.Pointer(&arenaBuf[0])))<<32 | int64(len(arenaBuf))
}

func main() {}
