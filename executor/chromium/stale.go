// Stale profiles: a built-in instance killed with SIGKILL (or its machine
// losing power) leaves its temporary user-data dir behind. The next start
// removes those it can prove stale.

package chromium

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// profilePrefix names the temporary user-data dirs Start makes.
const profilePrefix = "switchyard-chromium-"

// removeStaleProfiles removes the dirs under parent that Start made (their
// name starts with profilePrefix) and whose browser is gone: Chromium's
// SingletonLock in the dir names this host and a process that no longer
// exists. A dir without that lock (a browser still starting, or not one of
// ours), of another host, or whose process still runs, is left alone.
func removeStaleProfiles(parent string, log hclog.Logger) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	host, err := os.Hostname()
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), profilePrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		target, err := os.Readlink(filepath.Join(dir, "SingletonLock"))
		if err != nil {
			continue
		}
		// The lock's target is "<hostname>-<pid>".
		i := strings.LastIndexByte(target, '-')
		if i < 0 || target[:i] != host {
			continue
		}
		pid, err := strconv.Atoi(target[i+1:])
		if err != nil || pid <= 0 || processExists(pid) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("a stale browser profile could not be removed", "dir", dir, "error", err)
			continue
		}
		log.Info("removed a stale browser profile left by a browser that is gone", "dir", dir, "pid", pid)
	}
}

// processExists reports whether a process with this pid exists (one of
// another user counts: signal 0 is refused with EPERM).
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
