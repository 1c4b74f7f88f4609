package artifact_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/artifact"
)

// stores runs the same conformance checks against every Store, so that the
// implementations cannot drift.
func stores(t *testing.T) map[string]func(t *testing.T) artifact.Store {
	return map[string]func(t *testing.T) artifact.Store{
		"memory": func(t *testing.T) artifact.Store { return artifact.NewMemory() },
		"dir": func(t *testing.T) artifact.Store {
			s, err := artifact.NewDir(t.TempDir())
			require.NoError(t, err)
			return s
		},
	}
}

func TestStoreRoundTripsBytesAndMetadata(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := context.Background()
			data := []byte("\x89PNG\r\n\x1a\nimage")
			a, err := s.Put(ctx, "image/png", "task-1", data)
			require.NoError(t, err)
			sum := sha256.Sum256(data)
			require.Len(t, a.ID, 32)
			require.Equal(t, "image/png", a.ContentType)
			require.EqualValues(t, len(data), a.Size)
			require.Equal(t, hex.EncodeToString(sum[:]), a.SHA256)
			require.Equal(t, "task-1", a.TaskID)
			require.False(t, a.CreatedAt.IsZero())

			got, rc, err := s.Open(ctx, a.ID)
			require.NoError(t, err)
			body, err := io.ReadAll(rc)
			require.NoError(t, err)
			require.NoError(t, rc.Close())
			require.Equal(t, data, body)
			require.Equal(t, a.Ref, got.Ref)
			require.Equal(t, a.TaskID, got.TaskID)

			require.NoError(t, s.Delete(ctx, a.ID))
			_, _, err = s.Open(ctx, a.ID)
			require.ErrorIs(t, err, artifact.ErrNotFound)
			require.NoError(t, s.Delete(ctx, a.ID), "deleting twice is fine")
		})
	}
}

func TestStoreGivesDistinctIDsUnderConcurrency(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			var mu sync.Mutex
			ids := map[string]bool{}
			var wg sync.WaitGroup
			for i := 0; i < 50; i++ {
				wg.Go(func() {
					a, err := s.Put(context.Background(), "", "", []byte{byte(i)})
					require.NoError(t, err)
					mu.Lock()
					ids[a.ID] = true
					mu.Unlock()
					require.Equal(t, "application/octet-stream", a.ContentType)
				})
			}
			wg.Wait()
			require.Len(t, ids, 50)
		})
	}
}

func TestStoreRefusesUnknownAndMalformedIDs(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			for _, id := range []string{"", "../../etc/passwd", "0123456789abcdef0123456789abcdef", "ZZZ"} {
				_, _, err := s.Open(context.Background(), id)
				require.ErrorIs(t, err, artifact.ErrNotFound, id)
			}
		})
	}
}

func TestStoreKeepsItsOwnCopy(t *testing.T) {
	t.Parallel()
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			data := []byte("before")
			a, err := s.Put(context.Background(), "text/plain", "", data)
			require.NoError(t, err)
			copy(data, "AFTER!")
			_, rc, err := s.Open(context.Background(), a.ID)
			require.NoError(t, err)
			body, _ := io.ReadAll(rc)
			_ = rc.Close()
			require.Equal(t, "before", string(body))
		})
	}
}

func TestDirStoreSurvivesReopening(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := artifact.NewDir(dir)
	require.NoError(t, err)
	a, err := s.Put(context.Background(), "application/pdf", "t", []byte("%PDF"))
	require.NoError(t, err)
	s2, err := artifact.NewDir(dir)
	require.NoError(t, err)
	got, rc, err := s2.Open(context.Background(), a.ID)
	require.NoError(t, err)
	_ = rc.Close()
	require.Equal(t, a.Ref, got.Ref)
}
