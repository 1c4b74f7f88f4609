package sqlite

// The write-ahead log's frames, written in one system call a commit.
//
// SQLite writes a commit into the log frame by frame, each frame in two
// writes (its header, then its page), and then flushes the log. With a
// commit of some twenty pages that is forty pwrite calls before the flush,
// on the one goroutine that commits (doc/adr/0005-durable-write-path.md,
// finding 31). With SyncFull, nothing SQLite writes into the log is relied
// on before the flush that ends the commit: no other connection reads a
// frame before the commit is published in the WAL index, which SQLite does
// after that flush. So the writer's log file gathers consecutive writes in
// memory and hands them to the file at the flush, or before anything that
// could look at what was written: a read, a truncation, the file's size,
// a write elsewhere in the file, its closing, or once a megabyte is held.
// A crash loses what was gathered, as it loses writes the flush did not
// reach. With SyncNormal a commit does not flush the log, so its writes go
// to the file at once, as without this file system.

import (
	"sync"

	"github.com/ncruces/go-sqlite3/vfs"
)

// gatherVFS is the name of the file system that gathers the log's writes.
const gatherVFS = "switchyard-gather-wal"

var registerGather sync.Once

// gatherFS wraps SQLite's default file system: the log files it opens
// gather their writes (gatherFile), every other file is the default one's.
type gatherFS struct{ base vfs.VFSFilename }

func registerGatherVFS() {
	registerGather.Do(func() {
		vfs.Register(gatherVFS, gatherFS{base: vfs.Find("").(vfs.VFSFilename)})
	})
}

func (g gatherFS) Open(name string, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	return g.base.Open(name, flags) // temporary files: SQLite opens the others by OpenFilename
}

func (g gatherFS) OpenFilename(name *vfs.Filename, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	f, out, err := g.base.OpenFilename(name, flags)
	if err != nil || flags&vfs.OPEN_WAL == 0 {
		return f, out, err
	}
	return &gatherFile{File: f}, out, nil
}

func (g gatherFS) Delete(name string, syncDir bool) error { return g.base.Delete(name, syncDir) }

func (g gatherFS) Access(name string, flags vfs.AccessFlag) (bool, error) {
	return g.base.Access(name, flags)
}

func (g gatherFS) FullPathname(name string) (string, error) { return g.base.FullPathname(name) }

// maxGather bounds what a log file holds before writing it out.
const maxGather = 1 << 20

// gatherFile is a log file whose consecutive writes are held in buf, for
// the file from offset off, until the next flush (or anything else that
// must see them in the file). A connection uses its files from one
// goroutine at a time.
type gatherFile struct {
	vfs.File
	buf []byte
	off int64
}

func (f *gatherFile) Unwrap() vfs.File { return f.File }

// writeOut writes what is held to the file.
func (f *gatherFile) writeOut() error {
	if len(f.buf) == 0 {
		return nil
	}
	_, err := f.File.WriteAt(f.buf, f.off)
	f.buf = f.buf[:0]
	return err
}

func (f *gatherFile) WriteAt(p []byte, off int64) (int, error) {
	if len(f.buf) > 0 && off != f.off+int64(len(f.buf)) || len(f.buf)+len(p) > maxGather {
		if err := f.writeOut(); err != nil {
			return 0, err
		}
	}
	if len(f.buf) == 0 {
		f.off = off
	}
	f.buf = append(f.buf, p...)
	return len(p), nil
}

func (f *gatherFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.writeOut(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *gatherFile) Sync(flags vfs.SyncFlag) error {
	if err := f.writeOut(); err != nil {
		return err
	}
	return f.File.Sync(flags)
}

func (f *gatherFile) Truncate(size int64) error {
	if err := f.writeOut(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *gatherFile) Size() (int64, error) {
	if err := f.writeOut(); err != nil {
		return 0, err
	}
	return f.File.Size()
}

func (f *gatherFile) Close() error {
	err := f.writeOut()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

// SizeHint passes SQLITE_FCNTL_SIZE_HINT on to the default file.
func (f *gatherFile) SizeHint(size int64) error {
	if h, ok := f.File.(vfs.FileSizeHint); ok {
		if err := f.writeOut(); err != nil {
			return err
		}
		return h.SizeHint(size)
	}
	return nil
}
