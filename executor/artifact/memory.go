// The in-memory store: for tests, and for servers that keep nothing on disk.

package artifact

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"
)

// Memory is a Store that keeps artifacts in memory.
type Memory struct {
	mu    sync.RWMutex
	items map[string]memoryItem
	now   func() time.Time
}

type memoryItem struct {
	meta Artifact
	data []byte
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{items: make(map[string]memoryItem), now: time.Now}
}

// Put implements Store. It keeps its own copy of data.
func (m *Memory) Put(ctx context.Context, contentType, taskID string, data []byte) (Artifact, error) {
	if err := ctx.Err(); err != nil {
		return Artifact{}, err
	}
	a := newArtifact(contentType, taskID, data, m.now())
	m.mu.Lock()
	m.items[a.ID] = memoryItem{meta: a, data: bytes.Clone(data)}
	m.mu.Unlock()
	return a, nil
}

// Open implements Store.
func (m *Memory) Open(_ context.Context, id string) (Artifact, io.ReadCloser, error) {
	m.mu.RLock()
	it, ok := m.items[id]
	m.mu.RUnlock()
	if !ok {
		return Artifact{}, nil, ErrNotFound
	}
	return it.meta, io.NopCloser(bytes.NewReader(it.data)), nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	delete(m.items, id)
	m.mu.Unlock()
	return nil
}

// Len returns how many artifacts the store holds.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.items)
}
