package chromium

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
)

// A profile whose browser is gone is removed at start; one in use, one still
// starting (no lock yet), one of another host and a dir of another program
// are left alone.
func TestStartRemovesOnlyStaleProfiles(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	host, err := os.Hostname()
	require.NoError(t, err)
	profile := func(name, lock string) string {
		dir := filepath.Join(parent, name)
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "Local State"), []byte("{}"), 0o600))
		if lock != "" {
			require.NoError(t, os.Symlink(lock, filepath.Join(dir, "SingletonLock")))
		}
		return dir
	}
	// A pid past the kernel's pid_max cannot be running.
	stale := profile(profilePrefix+"1", host+"-"+strconv.Itoa(1<<23))
	live := profile(profilePrefix+"2", host+"-"+strconv.Itoa(os.Getpid()))
	starting := profile(profilePrefix+"3", "")
	elsewhere := profile(profilePrefix+"4", "otherhost.example-"+strconv.Itoa(1<<23))
	other := profile("someone-else-1", host+"-"+strconv.Itoa(1<<23))

	removeStaleProfiles(parent, hclog.NewNullLogger())
	require.NoDirExists(t, stale)
	for _, dir := range []string{live, starting, elsewhere, other} {
		require.DirExists(t, dir)
	}
}
