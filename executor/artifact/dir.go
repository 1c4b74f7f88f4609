// The file-system store: one directory, two files per artifact (the bytes and
// a JSON metadata file), each written to a temporary name and renamed, so a
// crash never leaves a half-written artifact under its id.

package artifact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Dir is a Store that keeps artifacts as files in a directory.
type Dir struct {
	dir string
	now func() time.Time
}

// NewDir returns a store in dir, creating the directory when needed.
func NewDir(dir string) (*Dir, error) {
	if dir == "" {
		return nil, errors.New("artifact: directory is required")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("artifact: create directory: %w", err)
	}
	return &Dir{dir: dir, now: time.Now}, nil
}

// Path returns the directory of the store.
func (d *Dir) Path() string { return d.dir }

func (d *Dir) dataPath(id string) string { return filepath.Join(d.dir, id+".bin") }
func (d *Dir) metaPath(id string) string { return filepath.Join(d.dir, id+".json") }

// Put implements Store.
func (d *Dir) Put(ctx context.Context, contentType, taskID string, data []byte) (Artifact, error) {
	if err := ctx.Err(); err != nil {
		return Artifact{}, err
	}
	a := newArtifact(contentType, taskID, data, d.now())
	meta, err := json.Marshal(a)
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact: encode metadata: %w", err)
	}
	// Bytes first, metadata last: an artifact exists once its metadata does.
	if err := writeAtomic(d.dataPath(a.ID), data); err != nil {
		return Artifact{}, err
	}
	if err := writeAtomic(d.metaPath(a.ID), meta); err != nil {
		_ = os.Remove(d.dataPath(a.ID))
		return Artifact{}, err
	}
	return a, nil
}

// Open implements Store.
func (d *Dir) Open(_ context.Context, id string) (Artifact, io.ReadCloser, error) {
	if !validID(id) {
		return Artifact{}, nil, ErrNotFound
	}
	raw, err := os.ReadFile(d.metaPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return Artifact{}, nil, ErrNotFound
	}
	if err != nil {
		return Artifact{}, nil, fmt.Errorf("artifact: read metadata: %w", err)
	}
	var a Artifact
	if err := json.Unmarshal(raw, &a); err != nil {
		return Artifact{}, nil, fmt.Errorf("artifact %s: decode metadata: %w", id, err)
	}
	f, err := os.Open(d.dataPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return Artifact{}, nil, ErrNotFound
	}
	if err != nil {
		return Artifact{}, nil, fmt.Errorf("artifact: open data: %w", err)
	}
	return a, f, nil
}

// Delete implements Store.
func (d *Dir) Delete(_ context.Context, id string) error {
	if !validID(id) {
		return nil
	}
	for _, p := range []string{d.metaPath(id), d.dataPath(id)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("artifact: delete: %w", err)
		}
	}
	return nil
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("artifact: create: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("artifact: write: %w", errors.Join(werr, cerr))
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("artifact: rename: %w", err)
	}
	return nil
}
