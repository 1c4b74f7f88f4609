// Chat-style instances take free-text instructions and answer with a stream of
// Server-Sent Events: progress, then the answer. The client reads the stream
// to its end and keeps the last data event; cancelling the context aborts it.

package pinchtab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// ChatRequest is an instruction for a chat-style instance.
type ChatRequest struct {
	Instruction string          // the free-text work
	TabID       string          // the tab to work in, or ""
	Params      json.RawMessage // further fields of the request body, or nil
}

// ChatResult is a chat's answer.
type ChatResult struct {
	Result json.RawMessage // the last data event, as JSON (text becomes a JSON string)
	Events int             // data events received, the last one included
}

// Chat sends an instruction (POST /chat {"instruction", "tabId", …params}) and
// reads the event stream to its end. The last data event is the result; a
// "[DONE]" sentinel is skipped; an "error" event fails the chat with its data
// as the message. A stream that ends mid-event, or without any data event, is
// a malformed answer. An instance that answers plain JSON instead of a stream
// is understood too.
func (c *Client) Chat(ctx context.Context, r ChatRequest) (ChatResult, error) {
	body, err := mergeObject(r.Params, "instruction", r.Instruction, "tabId", r.TabID)
	if err != nil {
		return ChatResult{}, &Error{Op: "chat", Method: http.MethodPost, Path: "/chat", Status: http.StatusBadRequest, Message: err.Error()}
	}
	return c.chat(ctx, body)
}

// BrowserOSChat is an instruction in BrowserOS Core's dialect of /chat.
type BrowserOSChat struct {
	ConversationID string            // a UUID, one per task
	Message        string            // the instruction
	LLM            map[string]string // the task's LLM configuration, merged over the defaults ("provider", "model", …)
}

// ChatBrowserOS sends an instruction to a BrowserOS-style instance (POST /chat
// {"conversationId","message","isScheduledTask":true,"mode":"agent",
// "supportsImages":false,"provider":"browseros"} with LLM merged over it) and
// reads its event stream like Chat: the data lines are JSON, the last one is
// the result.
func (c *Client) ChatBrowserOS(ctx context.Context, r BrowserOSChat) (ChatResult, error) {
	body := map[string]any{
		"isScheduledTask": true, "mode": "agent", "supportsImages": false, "provider": "browseros",
	}
	for k, v := range r.LLM {
		body[k] = v
	}
	body["conversationId"], body["message"] = r.ConversationID, r.Message
	data, err := json.Marshal(body)
	if err != nil {
		return ChatResult{}, &Error{Op: "chat", Method: http.MethodPost, Path: "/chat", Err: fmt.Errorf("encode request: %w", err)}
	}
	return c.chat(ctx, data)
}

// chat posts body to /chat and reads the answer.
func (c *Client) chat(ctx context.Context, body []byte) (ChatResult, error) {
	const path = "/chat"
	req, sent, err := c.newRequest(ctx, http.MethodPost, path, nil, body)
	if err != nil {
		return ChatResult{}, &Error{Op: "chat", Method: http.MethodPost, Path: path, Err: err}
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return ChatResult{}, c.transportError(ctx, "chat", http.MethodPost, path, sent, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return ChatResult{}, responseError("chat", http.MethodPost, path, resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		data, err := readLimited(resp.Body, c.maxBytes)
		if err != nil {
			return ChatResult{}, c.transportError(ctx, "chat", http.MethodPost, path, sent, err)
		}
		return ChatResult{Result: asJSON(data), Events: 1}, nil
	}

	dec := NewSSEDecoder(resp.Body)
	var (
		last   string
		events int
	)
	for {
		ev, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, ErrSSETruncated) || errors.Is(err, ErrSSELineTooLong) || errors.Is(err, ErrSSEEventTooLarge) {
				return ChatResult{}, malformed("chat", http.MethodPost, path, resp.StatusCode, "", err)
			}
			return ChatResult{}, c.transportError(ctx, "chat", http.MethodPost, path, sent, err)
		}
		switch {
		case ev.Type == "error":
			return ChatResult{}, &Error{Op: "chat", Method: http.MethodPost, Path: path, Status: resp.StatusCode, Code: "chat_error", Message: excerpt([]byte(ev.Data), 500)}
		case ev.Data == "[DONE]":
			continue
		}
		last = ev.Data
		events++
	}
	if events == 0 {
		return ChatResult{}, malformed("chat", http.MethodPost, path, resp.StatusCode, "event stream ended without a data event", nil)
	}
	return ChatResult{Result: asJSON([]byte(last)), Events: events}, nil
}
