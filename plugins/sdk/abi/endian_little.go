//go:build 386 || amd64 || amd64p32 || alpha || arm || arm64 || loong64 || mipsle || mips64le || mips64p32le || nios2 || ppc64le || riscv || riscv64 || sh || wasm

package abi

// littleEndian is whether the machine stores integers as the records do
// (the build constraints are encoding/binary's): a constant, so that the
// zero-copy paths cost no test where they apply and are left out where not.
const littleEndian = true
