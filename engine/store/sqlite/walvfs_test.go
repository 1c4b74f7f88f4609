package sqlite

import (
	"testing"

	"github.com/ncruces/go-sqlite3/vfs"
	"github.com/stretchr/testify/require"
)

// fileLog is a log file that records the calls that reach it.
type fileLog struct {
	vfs.File // nil: only the methods below are called
	data     []byte
	calls    []string
}

func (f *fileLog) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(f.data) {
		f.data = append(f.data, make([]byte, end-len(f.data))...)
	}
	copy(f.data[off:], p)
	f.calls = append(f.calls, "write")
	return len(p), nil
}

func (f *fileLog) ReadAt(p []byte, off int64) (int, error) {
	f.calls = append(f.calls, "read")
	return copy(p, f.data[off:]), nil
}

func (f *fileLog) Sync(vfs.SyncFlag) error {
	f.calls = append(f.calls, "sync")
	return nil
}

func (f *fileLog) Size() (int64, error) { return int64(len(f.data)), nil }

// A commit's frames, written header and page apart, reach the log in one
// write before its flush; whatever looks at the file first finds them in
// it, and a write elsewhere lands after them.
func TestGatheredLogWrites(t *testing.T) {
	under := &fileLog{}
	f := &gatherFile{File: under}
	for i := range 3 {
		off := int64(i * 12)
		_, err := f.WriteAt([]byte("header"), off)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("page.."), off+6)
		require.NoError(t, err)
	}
	require.Empty(t, under.calls, "nothing reaches the file before the flush")
	require.NoError(t, f.Sync(vfs.SYNC_NORMAL))
	require.Equal(t, []string{"write", "sync"}, under.calls)
	require.Equal(t, "header page..header page..header page..", spaced(under.data))

	under.calls = nil
	_, _ = f.WriteAt([]byte("abc"), 36)
	size, err := f.Size()
	require.NoError(t, err)
	require.EqualValues(t, 39, size)
	_, _ = f.WriteAt([]byte("xyz"), 39)
	p := make([]byte, 6)
	_, err = f.ReadAt(p, 36)
	require.NoError(t, err)
	require.Equal(t, "abcxyz", string(p))
	_, _ = f.WriteAt([]byte("later"), 100)
	_, _ = f.WriteAt([]byte("HEAD"), 0) // elsewhere: the held write goes first
	require.Equal(t, []string{"write", "write", "read", "write"}, under.calls)
	require.Equal(t, "later", string(under.data[100:105]))
	require.NoError(t, f.Sync(vfs.SYNC_NORMAL))
	require.Equal(t, "HEAD", string(under.data[:4]))
}

func spaced(b []byte) string {
	out := []byte{}
	for i := 0; i < len(b); i += 12 {
		out = append(out, b[i:i+6]...)
		out = append(out, ' ')
		out = append(out, b[i+6:i+12]...)
	}
	return string(out)
}
