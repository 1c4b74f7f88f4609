package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/store/sqlite"
)

func TestOneStorePerFile(t *testing.T) {
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "openbsd", "netbsd", "dragonfly": // lock_flock.go
	default:
		t.Skip("the lock file is not locked on this platform (lock_other.go)")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, Owner: "test holder"})
	require.NoError(t, err)
	require.NoError(t, s.SetOwner("switchyard serve, listening on 127.0.0.1:1234"))

	_, err = sqlite.Open(context.Background(), sqlite.Options{Path: path})
	require.ErrorIs(t, err, sqlite.ErrInUse, "a second store on the file is refused, even in the same process")
	for _, want := range []string{path, "pid " + strconv.Itoa(os.Getpid()), "listening on 127.0.0.1:1234", path + ".lock"} {
		require.Contains(t, err.Error(), want)
	}

	require.NoError(t, s.Close())
	s2, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	require.NoError(t, err, "closing the store releases the file")
	require.NoError(t, s2.Close())
}
