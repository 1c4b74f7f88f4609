package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/plugins/host"
)

// module assembles a module from sections (id, payload).
func module(sections ...[]byte) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		m = append(m, s...)
	}
	return m
}

// sec encodes a section whose payload is short (< 128 bytes).
func sec(id byte, payload ...byte) []byte {
	return append([]byte{id, byte(len(payload))}, payload...)
}

func TestModulesThatAnnounceHugeCountsAreRefusedAtOnce(t *testing.T) {
	t.Parallel()
	funcType := sec(1, 1, 0x60, 0, 0)
	oneFunc := sec(3, 1, 0)
	for name, tc := range map[string]struct {
		wasm []byte
		why  string
	}{
		// 2^28 exports in a section of a few bytes: wazero would allocate
		// a map and a slice for all of them first (FuzzLoad found it).
		"exports":        {module(sec(7, 0x80, 0x80, 0x80, 0x80, 0x01, 1, 'a', 0, 0)), "a vector of 268435456 items"},
		"imports":        {module(sec(2, 0xff, 0xff, 0xff, 0xff, 0x0f)), "a vector of"},
		"a name":         {module(sec(0, 0xff, 0xff, 0xff, 0xff, 0x0f, 'x')), "runs past the end"},
		"a name section": {module(sec(0, 4, 'n', 'a', 'm', 'e', 1, 6, 0xff, 0xff, 0xff, 0xff, 0x0f, 0)), "a vector of"},
		"data bytes":     {module(sec(5, 1, 0, 1), sec(11, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f)), "runs past the end"},
		// A function declaring 2^32 locals.
		"locals": {module(funcType, oneFunc, sec(10, 1, 8, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x7f, 0x0b)), "declares 4294967295 locals"},
		// A table of 2^27 elements per instance, outside the memory limit.
		"a table": {module(sec(4, 1, 0x70, 0, 0x80, 0x80, 0x80, 0x40)), "a table of 134217728 elements"},
		// table.grow could add as many in one instruction.
		"table.grow": {module(funcType, oneFunc, sec(4, 1, 0x70, 0, 0),
			sec(10, 1, 11, 0, 0xd0, 0x70, 0x41, 0xc0, 0x84, 0x3d, 0xfc, 0x0f, 0, 0x1a, 0x0b)), "table.grow"},
		"a section past the end": {module([]byte{1, 0xff, 0x7f}), "runs past the module"},
		"an endless LEB":         {module([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), "too long"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rt := newRuntime(t, host.Config{NoFileCache: true})
			start := time.Now()
			_, err := rt.Load(context.Background(), "hostile", tc.wasm, nil)
			require.ErrorIs(t, err, host.ErrInvalid)
			require.ErrorContains(t, err, tc.why)
			require.Less(t, time.Since(start), 5*time.Second, "refused without reading what the counts announce")
		})
	}
}
