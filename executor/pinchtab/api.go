// The typed endpoints: health, tab discovery and lifecycle, navigation,
// interactions and the read endpoints (text, snapshot, screenshot, evaluate).

package pinchtab

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// Health is an instance's answer to GET /health. A PinchTab bridge (a single
// browser) answers {"status":"ok","tabs":N}, or 503 with "error" and a reason,
// or "draining" while its browser restarts. A PinchTab server answers its
// dashboard envelope, {"status":"ok","mode":"dashboard","instances":N,
// "defaultInstance":{"id","status"}}, which has no tab count and says "ok"
// while its default browser is still "starting".
type Health struct {
	Status          string          `json:"status"`                    // "ok" when healthy
	Tabs            int             `json:"tabs"`                      // open tabs, from a bridge; a server does not say
	Mode            string          `json:"mode,omitempty"`            // "dashboard" from a server
	Instances       int             `json:"instances,omitempty"`       // browsers behind a server
	DefaultInstance *ServerInstance `json:"defaultInstance,omitempty"` // a server's first browser, when it has one
	Reason          string          `json:"reason,omitempty"`          // why it is not ok
	// Implementation is Builtin from Switchyard's built-in Chromium.
	Implementation string `json:"implementation,omitempty"`
}

// Health asks the instance whether it is up. Any 2xx answer counts; the body is
// decoded when it is JSON.
func (c *Client) Health(ctx context.Context) (Health, error) {
	resp, err := c.Do(ctx, "health", http.MethodGet, "/health", nil, nil)
	if err != nil {
		return Health{}, err
	}
	var h Health
	_ = json.Unmarshal(resp.Body, &h)
	c.builtin.Store(h.Implementation == Builtin)
	return h, nil
}

// Tab is a tab as an instance lists it.
type Tab struct {
	ID         string `json:"id"`
	InstanceID string `json:"instanceId,omitempty"` // on a PinchTab server: the browser that owns it
	URL        string `json:"url"`
	Title      string `json:"title"`
	Type       string `json:"type,omitempty"`
}

// Tabs lists the tabs of a single instance (GET /tabs).
func (c *Client) Tabs(ctx context.Context) ([]Tab, error) {
	resp, err := c.Do(ctx, "tabs", http.MethodGet, "/tabs", nil, nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Tabs []Tab `json:"tabs"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		// Tolerate a bare array, as the server endpoints answer.
		var bare []Tab
		if json.Unmarshal(resp.Body, &bare) != nil {
			return nil, malformed("tabs", http.MethodGet, "/tabs", resp.Status, "undecodable tab list", err)
		}
		return bare, nil
	}
	return out.Tabs, nil
}

// ServerInstance is a browser instance behind a PinchTab server.
type ServerInstance struct {
	ID     string `json:"id"`
	Status string `json:"status"` // "running" when usable
	Port   string `json:"port,omitempty"`
}

// Instances lists the browser instances behind a PinchTab server
// (GET /instances).
func (c *Client) Instances(ctx context.Context) ([]ServerInstance, error) {
	resp, err := c.Do(ctx, "instances", http.MethodGet, "/instances", nil, nil)
	if err != nil {
		return nil, err
	}
	var out []ServerInstance
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return nil, malformed("instances", http.MethodGet, "/instances", resp.Status, "undecodable instance list", err)
	}
	return out, nil
}

// freshQuery asks a PinchTab server for its tab list as it is now: without
// it the server may answer from a cache up to 1.5 s old, which would miss a
// tab just opened or list one just closed.
var freshQuery = url.Values{"fresh": {"1"}}

// AllTabs lists the tabs of every browser behind a PinchTab server
// (GET /instances/tabs?fresh=1, bypassing the server's tab cache).
func (c *Client) AllTabs(ctx context.Context) ([]Tab, error) {
	resp, err := c.Do(ctx, "tabs", http.MethodGet, "/instances/tabs", freshQuery, nil)
	if err != nil {
		return nil, err
	}
	var out []Tab
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return nil, malformed("tabs", http.MethodGet, "/instances/tabs", resp.Status, "undecodable tab list", err)
	}
	return out, nil
}

// OpenedTab is the answer to opening a tab.
type OpenedTab struct {
	TabID string `json:"tabId"`
	URL   string `json:"url,omitempty"`
	Title string `json:"title,omitempty"`
}

// OpenTab opens a tab on a single instance (POST /tab {"action":"new"}),
// navigated to pageURL unless it is "".
func (c *Client) OpenTab(ctx context.Context, pageURL string) (OpenedTab, error) {
	body := struct {
		Action string `json:"action"`
		URL    string `json:"url,omitempty"`
	}{"new", pageURL}
	return c.openTab(ctx, "/tab", body)
}

// OpenInstanceTab opens a tab in the browser instanceID behind a PinchTab
// server (POST /instances/{id}/tabs/open).
func (c *Client) OpenInstanceTab(ctx context.Context, instanceID, pageURL string) (OpenedTab, error) {
	body := struct {
		URL string `json:"url,omitempty"`
	}{pageURL}
	return c.openTab(ctx, "/instances/"+url.PathEscape(instanceID)+"/tabs/open", body)
}

func (c *Client) openTab(ctx context.Context, path string, body any) (OpenedTab, error) {
	resp, err := c.Do(ctx, "open tab", http.MethodPost, path, nil, body)
	if err != nil {
		return OpenedTab{}, err
	}
	var t OpenedTab
	if err := json.Unmarshal(resp.Body, &t); err != nil || t.TabID == "" {
		return OpenedTab{}, malformed("open tab", http.MethodPost, path, resp.Status, "answer has no tabId: "+excerpt(resp.Body, 120), nil)
	}
	return t, nil
}

// CloseTab closes a tab (POST /tabs/{id}/close).
func (c *Client) CloseTab(ctx context.Context, tabID string) error {
	_, err := c.Do(ctx, "close tab", http.MethodPost, tabPath(tabID, "close"), nil, json.RawMessage("{}"))
	return err
}

// Navigate loads pageURL in a tab (POST /tabs/{id}/navigate). params holds
// further fields of the request ({"timeout":…, "waitFor":…}) or is nil.
func (c *Client) Navigate(ctx context.Context, tabID, pageURL string, params json.RawMessage) (json.RawMessage, error) {
	body, err := mergeObject(params, "url", pageURL)
	if err != nil {
		return nil, &Error{Op: "navigate", Method: http.MethodPost, Path: tabPath(tabID, "navigate"), Status: http.StatusBadRequest, Message: err.Error()}
	}
	return c.DoJSON(ctx, "navigate", http.MethodPost, tabPath(tabID, "navigate"), nil, json.RawMessage(body))
}

// Action is an interaction with a tab: click, dblclick, type, fill, press,
// focus, hover, select, scroll, check, uncheck, or any other kind the instance
// knows.
type Action struct {
	Kind     string
	Ref      string          // an element reference from a snapshot ("e12"), or ""
	Selector string          // a selector ("css:#go", "#go", "xpath://a", "text:Go"), or ""
	Params   json.RawMessage // the kind's other fields ({"text":"…"}, {"key":"Enter"}), or nil
}

// Act performs an interaction (POST /tabs/{id}/action with
// {"kind","ref"|"selector",…params}) and returns the instance's answer,
// {"success":true,"result":{…}}.
func (c *Client) Act(ctx context.Context, tabID string, a Action) (json.RawMessage, error) {
	path := tabPath(tabID, "action")
	if a.Kind == "" {
		return nil, &Error{Op: "action", Method: http.MethodPost, Path: path, Status: http.StatusBadRequest, Message: "action kind is required"}
	}
	body, err := mergeObject(a.Params, "kind", a.Kind, "ref", a.Ref, "selector", a.Selector)
	if err != nil {
		return nil, &Error{Op: "action", Method: http.MethodPost, Path: path, Status: http.StatusBadRequest, Message: err.Error()}
	}
	return c.DoJSON(ctx, a.Kind, http.MethodPost, path, nil, json.RawMessage(body))
}

// Post calls one of a tab's other POST endpoints (POST /tabs/{id}/{endpoint}):
// "back", "forward", "reload", "wait", "find", "dialog", … with params as its
// JSON body (an empty object when nil) and query as its query. fixed are
// key/value pairs added to the body over params ("selector", "#go"); empty
// strings are left out.
func (c *Client) Post(ctx context.Context, tabID, endpoint string, query url.Values, params json.RawMessage, fixed ...any) (json.RawMessage, error) {
	path := tabPath(tabID, endpoint)
	body, err := mergeObject(params, fixed...)
	if err != nil {
		return nil, &Error{Op: endpoint, Method: http.MethodPost, Path: path, Status: http.StatusBadRequest, Message: err.Error()}
	}
	return c.DoJSON(ctx, endpoint, http.MethodPost, path, query, json.RawMessage(body))
}

// CodeWaitTimeout is the error code (ErrorCode) of a wait whose condition
// was not met within its own timeout (WaitTimeoutError).
const CodeWaitTimeout = "wait_timeout"

// WaitTimeoutError is a wait (POST /tabs/{id}/wait) whose condition was not
// met within its own timeout. PinchTab and the built-in Chromium answer such
// a wait 200 {"waited":false,"elapsed":…,"error":"timeout after …"}: the
// request went well, but what it waited for did not happen, and whatever
// needed it would run on a page that is not ready.
type WaitTimeoutError struct {
	Instance string          // what the instance is, as Client.Name says; "" is "pinchtab"
	Path     string          // the request's path (/tabs/{id}/wait)
	Status   int             // the instance's HTTP status, a 2xx: the request itself went well
	Message  string          // the instance's own text: its "error", or the start of its answer
	Answer   json.RawMessage // the instance's whole answer
}

func (e *WaitTimeoutError) Error() string {
	return cmp.Or(e.Instance, "pinchtab") + " wait (POST " + e.Path + "): the condition was not met within its timeout [" + CodeWaitTimeout + "]: " + e.Message
}

// ErrorCode returns CodeWaitTimeout (engine.ErrorCoder): a retry policy sees
// it as the failed attempt's code.
func (e *WaitTimeoutError) ErrorCode() string { return CodeWaitTimeout }

// Wait waits in a tab (POST /tabs/{id}/wait) for what params says (a
// "selector", "text", "url", "load", "fn" or a fixed "ms", within its
// "timeout"; fixed as in Post) and returns the instance's answer,
// {"waited":true,"elapsed",…}. An answer that says "waited": false — the
// condition was not met in time — is returned with a *WaitTimeoutError.
func (c *Client) Wait(ctx context.Context, tabID string, params json.RawMessage, fixed ...any) (json.RawMessage, error) {
	path := tabPath(tabID, "wait")
	body, err := mergeObject(params, fixed...)
	if err != nil {
		return nil, &Error{Op: "wait", Method: http.MethodPost, Path: path, Status: http.StatusBadRequest, Message: err.Error()}
	}
	resp, err := c.Do(ctx, "wait", http.MethodPost, path, nil, json.RawMessage(body))
	if err != nil {
		return nil, err
	}
	res := asJSON(resp.Body)
	var ans struct {
		Waited *bool  `json:"waited"`
		Error  string `json:"error"`
	}
	if json.Unmarshal(res, &ans) == nil && ans.Waited != nil && !*ans.Waited {
		msg := ans.Error
		if msg == "" {
			msg = excerpt(res, 200)
		}
		return res, &WaitTimeoutError{Path: path, Status: resp.Status, Message: msg, Answer: res}
	}
	return res, nil
}

// Read calls one of a tab's GET read endpoints ("text", "snapshot", "title",
// "url", "html", …) with query and returns its JSON answer.
func (c *Client) Read(ctx context.Context, tabID, endpoint string, query url.Values) (json.RawMessage, error) {
	return c.DoJSON(ctx, endpoint, http.MethodGet, tabPath(tabID, endpoint), query, nil)
}

// Text returns a tab's text (GET /tabs/{id}/text), of the element selector
// matches when selector is not "".
func (c *Client) Text(ctx context.Context, tabID, selector string, query url.Values) (json.RawMessage, error) {
	if selector != "" {
		query = withParam(query, "selector", selector)
	}
	return c.Read(ctx, tabID, "text", query)
}

// Snapshot returns a tab's accessibility snapshot (GET /tabs/{id}/snapshot),
// whose refs later actions can name.
func (c *Client) Snapshot(ctx context.Context, tabID string, query url.Values) (json.RawMessage, error) {
	return c.Read(ctx, tabID, "snapshot", query)
}

// Evaluate runs a JavaScript expression in a tab (POST /tabs/{id}/evaluate)
// and returns {"result":…}.
func (c *Client) Evaluate(ctx context.Context, tabID, expression string, params json.RawMessage) (json.RawMessage, error) {
	path := tabPath(tabID, "evaluate")
	body, err := mergeObject(params, "expression", expression)
	if err != nil {
		return nil, &Error{Op: "evaluate", Method: http.MethodPost, Path: path, Status: http.StatusBadRequest, Message: err.Error()}
	}
	return c.DoJSON(ctx, "evaluate", http.MethodPost, path, nil, json.RawMessage(body))
}

// Binary is a binary answer: an image, a PDF.
type Binary struct {
	ContentType string
	Data        []byte
}

// Screenshot captures a tab (GET /tabs/{id}/screenshot?raw=true) and returns
// the image. query may set format (png, jpeg), quality, selector, …; an
// instance that ignores raw and answers {"format","base64"} is understood too.
func (c *Client) Screenshot(ctx context.Context, tabID string, query url.Values) (Binary, error) {
	return c.binary(ctx, "screenshot", tabID, query)
}

// PDF prints a tab (GET /tabs/{id}/pdf?raw=true).
func (c *Client) PDF(ctx context.Context, tabID string, query url.Values) (Binary, error) {
	return c.binary(ctx, "pdf", tabID, query)
}

func (c *Client) binary(ctx context.Context, endpoint, tabID string, query url.Values) (Binary, error) {
	query = withParam(query, "raw", "true")
	path := tabPath(tabID, endpoint)
	resp, err := c.Do(ctx, endpoint, http.MethodGet, path, query, nil)
	if err != nil {
		return Binary{}, err
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if mt != "application/json" {
		if ct == "" {
			ct = http.DetectContentType(resp.Body)
		}
		return Binary{ContentType: ct, Data: resp.Body}, nil
	}
	var enc struct {
		Format string `json:"format"`
		Base64 string `json:"base64"`
	}
	if err := json.Unmarshal(resp.Body, &enc); err != nil || enc.Base64 == "" {
		return Binary{}, malformed(endpoint, http.MethodGet, path, resp.Status, "answer is neither raw bytes nor {format, base64}", err)
	}
	data, err := base64.StdEncoding.DecodeString(enc.Base64)
	if err != nil {
		return Binary{}, malformed(endpoint, http.MethodGet, path, resp.Status, "bad base64 in answer", err)
	}
	ct = http.DetectContentType(data)
	if enc.Format != "" && !strings.HasPrefix(ct, "image/") && endpoint == "screenshot" {
		ct = "image/" + enc.Format
	}
	return Binary{ContentType: ct, Data: data}, nil
}

// withParam returns a copy of q with key set to value.
func withParam(q url.Values, key, value string) url.Values {
	out := make(url.Values, len(q)+1)
	for k, v := range q {
		out[k] = v
	}
	out.Set(key, value)
	return out
}
