// A BrowserOS Core double: its /chat contract as the BrowserOS Server Edition
// task queue uses it.

package pinchtabtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
)

// BrowserOSRequest is the body BrowserOS Core's POST /chat takes. The LLM
// fields are the configuration a task may merge over the defaults.
type BrowserOSRequest struct {
	ConversationID  string `json:"conversationId"`
	Message         string `json:"message"`
	IsScheduledTask bool   `json:"isScheduledTask"`
	Mode            string `json:"mode"`
	SupportsImages  bool   `json:"supportsImages"`
	Provider        string `json:"provider"`
	Model           string `json:"model,omitempty"`
	APIKey          string `json:"apiKey,omitempty"`
	BaseURL         string `json:"baseUrl,omitempty"`
}

// BrowserOS is the double. It refuses unknown fields and a missing message
// (400), and answers Server-Sent Events whose data lines are JSON, the last
// one the result: {"type":"finish","conversationId","text":"done: <message>"}.
type BrowserOS struct {
	srv *httptest.Server

	mu       sync.Mutex
	received []BrowserOSRequest
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// NewBrowserOS starts the double; it stops with the test.
func NewBrowserOS(t interface {
	Helper()
	Cleanup(func())
}) *BrowserOS {
	t.Helper()
	b := &BrowserOS{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("POST /chat", b.chat)
	b.srv = httptest.NewServer(mux)
	t.Cleanup(b.srv.Close)
	return b
}

// URL is the double's base URL.
func (b *BrowserOS) URL() string { return b.srv.URL }

// Received returns the bodies of the chats accepted so far.
func (b *BrowserOS) Received() []BrowserOSRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]BrowserOSRequest(nil), b.received...)
}

func (b *BrowserOS) chat(w http.ResponseWriter, r *http.Request) {
	var req BrowserOSRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		reply(w, http.StatusBadRequest, map[string]string{"error": "invalid request: " + err.Error()})
		return
	}
	switch {
	case req.Message == "":
		reply(w, http.StatusBadRequest, map[string]string{"error": "message is required"})
		return
	case !uuidPattern.MatchString(req.ConversationID):
		reply(w, http.StatusBadRequest, map[string]string{"error": "conversationId must be a UUID"})
		return
	}
	b.mu.Lock()
	b.received = append(b.received, req)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	var out bytes.Buffer
	for _, ev := range []map[string]any{
		{"type": "start", "conversationId": req.ConversationID},
		{"type": "text-delta", "delta": "working on it"},
		{"type": "finish", "conversationId": req.ConversationID, "text": "done: " + req.Message},
	} {
		data, _ := json.Marshal(ev)
		fmt.Fprintf(&out, "data: %s\n\n", data)
	}
	_, _ = w.Write(out.Bytes())
}
