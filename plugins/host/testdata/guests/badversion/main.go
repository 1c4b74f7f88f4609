//go:build wasip1

// Command badversion speaks a future ABI version: the host must refuse it.
package main

import "unsafe"

var arenaBuf [4096]byte

//go:wasmexport abi_version
func abiVersion() int32 { return 99 }

//go:wasmexport arena
func arena(int32) int64 {
	return int64(uintptr(unsafe.Pointer(&arenaBuf[0])))<<32 | int64(len(arenaBuf))
}

//go:wasmexport retry_decide
func decide() int64 { return 1 }

func main() {}
