// Package artifact keeps the large binary results of tasks — screenshots,
// PDFs, oversized answers — out of task records. A result carries a Ref (id,
// content type, size, digest); the bytes live in a Store, from which the server
// can serve them on demand.
package artifact

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned for an id the store does not hold.
var ErrNotFound = errors.New("artifact not found")

// Ref identifies a stored artifact. It is what task results carry.
type Ref struct {
	ID          string `json:"id"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
}

// Artifact is a stored artifact's metadata.
type Artifact struct {
	Ref
	TaskID    string    `json:"taskId,omitempty"` // the task that produced it
	CreatedAt time.Time `json:"createdAt"`
}

// Store holds artifacts. Implementations are safe for concurrent use.
type Store interface {
	// Put stores data and returns its metadata, with a new id.
	Put(ctx context.Context, contentType, taskID string, data []byte) (Artifact, error)
	// Open returns an artifact's metadata and a reader of its bytes, which the
	// caller closes; ErrNotFound when there is no such artifact.
	Open(ctx context.Context, id string) (Artifact, io.ReadCloser, error)
	// Delete removes an artifact; deleting a missing one is not an error.
	Delete(ctx context.Context, id string) error
}

// newArtifact fills in the metadata of data: a new id (time-ordered, then
// random), its size and digest.
func newArtifact(contentType, taskID string, data []byte, now time.Time) Artifact {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(now.UnixNano()))
	_, _ = rand.Read(raw[8:])
	sum := sha256.Sum256(data)
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	return Artifact{
		Ref: Ref{
			ID:          hex.EncodeToString(raw[:]),
			ContentType: contentType,
			Size:        int64(len(data)),
			SHA256:      hex.EncodeToString(sum[:]),
		},
		TaskID:    taskID,
		CreatedAt: now.UTC(),
	}
}

// validID reports whether id has the shape of an id this package makes, which
// keeps ids from naming paths outside a Dir store.
func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
