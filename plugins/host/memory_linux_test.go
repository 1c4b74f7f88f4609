//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64)

package host_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/plugins/host"
)

// The memory an instance starts with is resident once the instance is
// made: a decision's first loads into it cost no page faults, which fuel
// does not price and which on a virtual machine cost tens of microseconds
// each. Here a module declares 64 pages (4 MiB) it never touches; before,
// only the pages its data and the arena's header touched were resident.
func TestAnInstanceStartsWithItsMemoryResident(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, host.Config{NoFileCache: true})
	const pages = 64
	p, err := rt.Load(ctx, "untouched", hostileModuleMem([][]byte{answer}, nil, nil, "", pages, nil), nil)
	require.NoError(t, err)
	in := host.TakeIdle(p)
	mem := in.Memory()
	require.Len(t, mem, pages<<16)
	n, total := resident(t, mem)
	require.True(t, in.Slip(p))
	require.Equal(t, total, n, "pages resident out of %d", total)
}

// resident counts b's resident pages (mincore), and its pages in all.
func resident(t *testing.T, b []byte) (n, total int) {
	page := os.Getpagesize()
	vec := make([]byte, (len(b)+page-1)/page)
	_, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, e, "mincore")
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, len(vec)
}
