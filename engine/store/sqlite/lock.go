package sqlite

// Exclusive ownership of a database file. SQLite's own locks serialise
// transactions, not processes: two processes that each keep their own
// counters (the last event seq, the highest task seq) between transactions
// would interleave their writes and leave a file whose bookkeeping
// disagrees with its rows. So a Store owns its file for as long as it is
// open, through an advisory lock on a lock file next to it (the database's
// name plus ".lock"): the kernel releases the lock when the process ends,
// however it ends, so a crash never leaves a stale lock behind.
//
// Why a separate file rather than the database itself: on BSD and macOS the
// driver takes flock(2) locks on the database file for its own transaction
// locking, which ours would collide with; and the lock file can say who
// holds it (the process id, the host and what the owner wrote, e.g. the
// address it listens on), for the message a refused process prints.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrInUse is what Open returns (wrapped, naming the file and the holder)
// when another Store, in this process or another, has the database open.
var ErrInUse = errors.New("in use by another process")

// lockSuffix names the lock file: the database's path plus this.
const lockSuffix = ".lock"

// ownerLock is a held lock on a database's lock file.
type ownerLock struct {
	f     *os.File
	start time.Time
}

// lockOwner takes the lock of the database at path, without waiting, and
// writes who holds it. When another holds it, the error wraps ErrInUse and
// says who that is, as far as the lock file tells.
func lockOwner(path, owner string) (*ownerLock, error) {
	lp := path + lockSuffix
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the lock file %s: %w", lp, err)
	}
	held, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", lp, err)
	}
	if !held {
		holder := describeHolder(f)
		_ = f.Close()
		return nil, fmt.Errorf("%w (%s; lock file %s): stop it first", ErrInUse, holder, lp)
	}
	l := &ownerLock{f: f, start: time.Now()}
	if err := l.setOwner(owner); err != nil {
		l.release()
		return nil, fmt.Errorf("write the lock file %s: %w", lp, err)
	}
	return l, nil
}

// setOwner rewrites the lock file's description of the holder.
func (l *ownerLock) setOwner(owner string) error {
	var b bytes.Buffer
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "pid: %d\nhost: %s\nsince: %s\n", os.Getpid(), host, l.start.UTC().Format(time.RFC3339))
	if owner = strings.TrimSpace(owner); owner != "" {
		fmt.Fprintf(&b, "owner: %s\n", strings.ReplaceAll(owner, "\n", " "))
	}
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt(b.Bytes(), 0)
	return err
}

// release drops the lock. The lock file stays: removing it would race with
// a process that has just opened it and is about to lock it.
func (l *ownerLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = unlock(l.f)
	_ = l.f.Close()
	l.f = nil
}

// describeHolder reads what the holder wrote in the lock file: "pid 123 on
// host h, since …, owner …", or says that it wrote nothing yet.
func describeHolder(f *os.File) string {
	buf := make([]byte, 4096)
	n, _ := f.ReadAt(buf, 0)
	fields := map[string]string{}
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	pid, err := strconv.Atoi(fields["pid"])
	if err != nil {
		return "held by a process that has not said who it is yet"
	}
	s := "held by pid " + strconv.Itoa(pid)
	if h := fields["host"]; h != "" {
		s += " on " + h
	}
	if o := fields["owner"]; o != "" {
		s += ", " + o
	}
	if since := fields["since"]; since != "" {
		s += ", since " + since
	}
	return s
}
