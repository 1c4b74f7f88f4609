// The artifacts of tasks: results reference them by id
// ({"artifact": {"id", "contentType", "size", "sha256"}}) and clients fetch
// the bytes here. Artifacts never change, so they are cached for good and
// revalidated by their digest. An agent token reads the artifacts of its
// own agent's tasks only.

package server

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/graph/auth"
)

func (s *Server) artifact(w http.ResponseWriter, r *http.Request) {
	if s.opts.Artifacts == nil {
		http.Error(w, "this server keeps no artifacts", http.StatusNotFound)
		return
	}
	id := r.PathValue("id")
	a, body, err := s.opts.Artifacts.Open(r.Context(), id)
	if errors.Is(err, artifact.ErrNotFound) {
		http.Error(w, "no artifact "+strconv.Quote(id), http.StatusNotFound)
		return
	}
	if err != nil {
		s.log.Error("artifact", "id", id, "error", err)
		http.Error(w, "reading the artifact failed", http.StatusInternalServerError)
		return
	}
	defer body.Close()
	if !s.mayRead(r, a.TaskID) {
		http.Error(w, "no artifact "+strconv.Quote(id), http.StatusNotFound)
		return
	}
	etag := `"` + a.SHA256 + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", a.ContentType)
	h.Set("Content-Length", strconv.FormatInt(a.Size, 10))
	// The bytes come from web pages: never let a browser run them as ours.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'")
	if _, err := io.Copy(w, body); err != nil {
		s.log.Debug("artifact: client went away", "id", id, "error", err)
	}
}

// mayRead reports whether the caller may read an artifact of a task: an
// agent reads its own tasks' artifacts only.
func (s *Server) mayRead(r *http.Request, taskID string) bool {
	id := auth.FromContext(r.Context())
	if id == nil {
		return false
	}
	agent := id.Agent()
	if agent == "" {
		return true
	}
	t, err := s.opts.Engine.Task(r.Context(), taskID)
	return err == nil && t.Spec.AgentID == agent
}
