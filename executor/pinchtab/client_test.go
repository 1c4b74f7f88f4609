package pinchtab_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/pinchtab"
)

const testToken = "s3cret-token-value"

// recorded is one request as the test server saw it.
type recorded struct {
	Method  string
	Path    string // escaped
	Query   url.Values
	Body    string
	Auth    string
	Agent   string
	Task    string
	Content string
}

// recorder is an httptest server that records requests and answers each with
// the reply its handler function chooses.
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  []recorded
	reply func(w http.ResponseWriter, r *http.Request)
}

func newRecorder(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *recorder {
	t.Helper()
	rec := &recorder{reply: reply}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{
			Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Body: string(body),
			Auth: r.Header.Get("Authorization"), Agent: r.Header.Get(pinchtab.HeaderAgent),
			Task: r.Header.Get(pinchtab.HeaderTask), Content: r.Header.Get("Content-Type"),
		})
		rec.mu.Unlock()
		rec.reply(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) last(t *testing.T) recorded {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.reqs, "the server received no request")
	return rec.reqs[len(rec.reqs)-1]
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.reqs)
}

func jsonReply(status int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func newClient(t *testing.T, rec *recorder) *pinchtab.Client {
	t.Helper()
	c, err := pinchtab.New(rec.srv.URL, testToken)
	require.NoError(t, err)
	return c
}

func agentCtx() context.Context {
	return pinchtab.WithRequestInfo(context.Background(), pinchtab.RequestInfo{AgentID: "agent-7", TaskID: "task-42"})
}

func TestRequestsUseExactPathsBodiesAndHeaders(t *testing.T) {
	t.Parallel()
	type call func(ctx context.Context, c *pinchtab.Client) error
	cases := []struct {
		name      string
		reply     string
		call      call
		method    string
		path      string
		query     url.Values
		body      string // JSON, compared semantically; "" means no body
		wantReply string // what the call returns, compared as JSON; "" skips
	}{
		{
			name: "navigate", reply: `{"tabId":"T1","url":"http://x/","title":"X"}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				_, err := c.Navigate(ctx, "T1", "http://x/", json.RawMessage(`{"timeout":5}`))
				return err
			},
			method: "POST", path: "/tabs/T1/navigate", body: `{"url":"http://x/","timeout":5}`,
		},
		{
			name: "fill", reply: `{"success":true,"result":{"filled":true}}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				res, err := c.Act(ctx, "T1", pinchtab.Action{Kind: "fill", Selector: "css:#name", Params: json.RawMessage(`{"text":"Ada"}`)})
				if err == nil && string(res) != `{"success":true,"result":{"filled":true}}` {
					return errors.New("fill returned " + string(res))
				}
				return err
			},
			method: "POST", path: "/tabs/T1/action", body: `{"kind":"fill","selector":"css:#name","text":"Ada"}`,
		},
		{
			name: "click by ref; explicit fields win over params", reply: `{"success":true}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				_, err := c.Act(ctx, "T1", pinchtab.Action{Kind: "click", Ref: "e5", Params: json.RawMessage(`{"kind":"hover","waitNav":true}`)})
				return err
			},
			method: "POST", path: "/tabs/T1/action", body: `{"kind":"click","ref":"e5","waitNav":true}`,
		},
		{
			name: "selectors needing escapes survive", reply: `{"success":true}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				_, err := c.Act(ctx, "T1", pinchtab.Action{Kind: "click", Selector: "text:Say \"hi\" <now> & \\ é\n"})
				return err
			},
			method: "POST", path: "/tabs/T1/action", body: `{"kind":"click","selector":"text:Say \"hi\" \u003cnow\u003e \u0026 \\ é\n"}`,
		},
		{
			name: "press", reply: `{"success":true}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				_, err := c.Act(ctx, "T1", pinchtab.Action{Kind: "press", Params: json.RawMessage(`{"key":"Enter"}`)})
				return err
			},
			method: "POST", path: "/tabs/T1/action", body: `{"kind":"press","key":"Enter"}`,
		},
		{
			name: "text", reply: `{"text":"hello"}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				_, err := c.Text(ctx, "T1", "#out", nil)
				return err
			},
			method: "GET", path: "/tabs/T1/text", query: url.Values{"selector": {"#out"}},
		},
		{
			name: "snapshot", reply: `{"nodes":[]}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				_, err := c.Snapshot(ctx, "T1", url.Values{"filter": {"interactive"}})
				return err
			},
			method: "GET", path: "/tabs/T1/snapshot", query: url.Values{"filter": {"interactive"}},
		},
		{
			name: "evaluate", reply: `{"result":3}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				_, err := c.Evaluate(ctx, "T1", "1+2", nil)
				return err
			},
			method: "POST", path: "/tabs/T1/evaluate", body: `{"expression":"1+2"}`,
		},
		{
			name: "close", reply: `{"closed":true}`,
			call:   func(ctx context.Context, c *pinchtab.Client) error { return c.CloseTab(ctx, "T1") },
			method: "POST", path: "/tabs/T1/close", body: `{}`,
		},
		{
			name: "open on a server instance", reply: `{"tabId":"T9"}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				tab, err := c.OpenInstanceTab(ctx, "inst_1", "http://x/")
				if err == nil && tab.TabID != "T9" {
					return errors.New("wrong tab id " + tab.TabID)
				}
				return err
			},
			method: "POST", path: "/instances/inst_1/tabs/open", body: `{"url":"http://x/"}`,
		},
		{
			name: "open on a single instance", reply: `{"tabId":"T8","url":"about:blank"}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				_, err := c.OpenTab(ctx, "")
				return err
			},
			method: "POST", path: "/tab", body: `{"action":"new"}`,
		},
		{
			name: "list server tabs", reply: `[{"id":"T1","instanceId":"inst_1","url":"u","title":"t"}]`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				tabs, err := c.AllTabs(ctx)
				if err == nil && (len(tabs) != 1 || tabs[0].InstanceID != "inst_1") {
					return errors.New("tabs not decoded")
				}
				return err
			},
			method: "GET", path: "/instances/tabs", query: url.Values{"fresh": {"1"}},
		},
		{
			name: "list instance tabs", reply: `{"tabs":[{"id":"T1","url":"u","title":"t","type":"page"}]}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				tabs, err := c.Tabs(ctx)
				if err == nil && (len(tabs) != 1 || tabs[0].ID != "T1") {
					return errors.New("tabs not decoded")
				}
				return err
			},
			method: "GET", path: "/tabs",
		},
		{
			name: "health", reply: `{"status":"ok","tabs":2}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				h, err := c.Health(ctx)
				if err == nil && (h.Status != "ok" || h.Tabs != 2) {
					return errors.New("health not decoded")
				}
				return err
			},
			method: "GET", path: "/health",
		},
		{
			name: "tab ids are escaped", reply: `{"success":true}`,
			call: func(ctx context.Context, c *pinchtab.Client) error {
				_, err := c.Act(ctx, "a/b c", pinchtab.Action{Kind: "focus", Selector: "#q"})
				return err
			},
			method: "POST", path: "/tabs/a%2Fb%20c/action", body: `{"kind":"focus","selector":"#q"}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, jsonReply(200, tc.reply))
			require.NoError(t, tc.call(agentCtx(), newClient(t, rec)))
			got := rec.last(t)
			require.Equal(t, tc.method, got.Method)
			require.Equal(t, tc.path, got.Path)
			if tc.query == nil {
				tc.query = url.Values{}
			}
			require.Equal(t, tc.query, got.Query)
			if tc.body == "" {
				require.Empty(t, got.Body, "a %s request must have no body", tc.method)
			} else {
				require.JSONEq(t, tc.body, got.Body)
				require.Equal(t, "application/json", got.Content)
			}
			require.Equal(t, "Bearer "+testToken, got.Auth, "every call carries the bearer token")
			require.Equal(t, "agent-7", got.Agent, "every call carries the agent id")
			require.Equal(t, "task-42", got.Task, "every call carries the task id")
		})
	}
}

func TestNoTokenMeansNoAuthorizationHeader(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, jsonReply(200, `{"status":"ok"}`))
	c, err := pinchtab.New(rec.srv.URL, "")
	require.NoError(t, err)
	_, err = c.Health(context.Background())
	require.NoError(t, err)
	got := rec.last(t)
	require.Empty(t, got.Auth)
	require.Empty(t, got.Agent, "no agent header without request info")
}

func TestStatusFamiliesMapToRetryabilityWhenTheBodyHasNoCode(t *testing.T) {
	t.Parallel()
	cases := map[int]bool{
		400: false, 403: false, 404: false, 405: false, 422: false,
		408: true, 409: true, 423: true, 429: true,
		500: true, 501: true, 504: true,
		401: true, 502: true, 503: true, // instance faults
	}
	for status, retryable := range cases {
		rec := newRecorder(t, jsonReply(status, `{"error":"went wrong"}`))
		_, err := newClient(t, rec).Act(context.Background(), "T1", pinchtab.Action{Kind: "click", Selector: "#go"})
		var pe *pinchtab.Error
		require.ErrorAs(t, err, &pe, "status %d", status)
		require.Equal(t, status, pe.Status)
		require.Equal(t, retryable, pe.Retryable(), "status %d", status)
		require.Equal(t, "went wrong", pe.Message)
		require.Equal(t, status, pinchtab.StatusOf(err))
		require.NotContains(t, err.Error(), testToken)
	}
}

func TestPinchTabsCodeAndRetryableFlagDecide(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status    int
		body      string
		retryable bool
		fault     bool
		shows     string
	}{
		// A text selector that matches nothing: 500 with the generic code.
		{500, `{"error":"element not found","code":"error"}`, false, false, "500 Internal Server Error [error]: element not found (not retryable)"},
		{409, `{"error":"unexpected page navigation","code":"navigation_changed"}`, false, false, "[navigation_changed]: unexpected page navigation (not retryable)"},
		{429, `{"error":"slow down","code":"rate_limited","retryable":true}`, true, false, "[rate_limited]: slow down (retryable)"},
		{423, `{"error":"locked","code":"tab_locked"}`, false, false, "[tab_locked]"},
		{401, `{"error":"bad token","code":"bad_token"}`, true, true, "401 Unauthorized [bad_token]: bad token"},
		{503, `{"error":"browser draining","code":"browser_draining","retryable":true}`, true, true, "[browser_draining]"},
		{503, `{"error":"instance \"x\" is not running (status: stopping)","code":"error"}`, true, true, "is not running"},
		{502, `{"error":"proxy: connection refused","code":"error"}`, true, true, "[error]"},
		{502, `{"error":"navigation aborted","code":"nav_binary_aborted"}`, false, false, "[nav_binary_aborted]"},
		{404, `{"type":"about:blank","title":"Not Found","status":404,"detail":"tab X not found","code":"tab_not_found"}`, false, false, "[tab_not_found]: tab X not found"},
	}
	for _, tc := range cases {
		rec := newRecorder(t, jsonReply(tc.status, tc.body))
		_, err := newClient(t, rec).Act(context.Background(), "T1", pinchtab.Action{Kind: "click", Selector: "#go"})
		var pe *pinchtab.Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, tc.retryable, pe.Retryable(), tc.body)
		require.Equal(t, tc.fault, pe.InstanceFault(), tc.body)
		require.Contains(t, err.Error(), tc.shows)
	}
}

func TestAnErrorFoundToBeAnInstanceFaultSaysSoInsteadOfItsCodesVerdict(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, jsonReply(404, `{"error":"tab \"T1\" not found","code":"error"}`))
	_, err := newClient(t, rec).Read(context.Background(), "T1", "title", nil)
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.False(t, pe.Retryable())
	require.Contains(t, pe.Error(), `404 Not Found [error]: tab "T1" not found (not retryable)`)

	fault := pe.AsInstanceFault()
	require.True(t, fault.InstanceFault())
	require.True(t, fault.Retryable(), "an instance fault is retried")
	require.Equal(t, `pinchtab title (GET /tabs/T1/title): 404 Not Found [error]: tab "T1" not found (instance fault)`, fault.Error(),
		"the message keeps the instance's status, code and text, and says what happens to it")
	require.Equal(t, 404, pinchtab.StatusOf(fault))
	require.False(t, pe.InstanceFault(), "the original is left as it was")

	// Without a code, too, the message says so.
	plain := (&pinchtab.Error{Op: "title", Method: "GET", Path: "/tabs/T1/title", Status: 404, Message: "page not found"}).AsInstanceFault()
	require.Equal(t, "pinchtab title (GET /tabs/T1/title): 404 Not Found: page not found (instance fault)", plain.Error())
}

func TestAWaitThatWasNotMetIsAWaitTimeoutError(t *testing.T) {
	t.Parallel()
	const timedOut = `{"waited":false,"elapsed":203,"error":"timeout after 203ms waiting for selector"}`
	rec := newRecorder(t, jsonReply(200, timedOut))
	res, err := newClient(t, rec).Wait(context.Background(), "T1", json.RawMessage(`{"timeout":200}`), "selector", "#late")
	var wt *pinchtab.WaitTimeoutError
	require.ErrorAs(t, err, &wt)
	require.Equal(t, "wait_timeout", wt.ErrorCode())
	require.Equal(t, "timeout after 203ms waiting for selector", wt.Message, "the instance's own text")
	require.JSONEq(t, timedOut, string(wt.Answer))
	require.JSONEq(t, timedOut, string(res), "the answer comes back with the error")
	require.Equal(t, "pinchtab wait (POST /tabs/T1/wait): the condition was not met within its timeout [wait_timeout]: timeout after 203ms waiting for selector", err.Error())
	require.Equal(t, 0, pinchtab.StatusOf(err), "not an HTTP failure")
	require.Equal(t, 200, wt.Status, "the instance's status, kept for the attempt")
	require.Equal(t, 1, rec.count())
	require.JSONEq(t, `{"timeout":200,"selector":"#late"}`, rec.last(t).Body)

	// Without a reason, the answer itself is the text.
	rec = newRecorder(t, jsonReply(200, `{"waited":false}`))
	_, err = newClient(t, rec).Wait(context.Background(), "T1", nil)
	require.ErrorAs(t, err, &wt)
	require.Equal(t, `{"waited":false}`, wt.Message)

	// A wait that was met, or an answer that does not say, is no failure.
	for _, body := range []string{`{"waited":true,"elapsed":5,"match":"#late"}`, `{"ok":true}`} {
		rec = newRecorder(t, jsonReply(200, body))
		res, err = newClient(t, rec).Wait(context.Background(), "T1", nil)
		require.NoError(t, err, body)
		require.JSONEq(t, body, string(res))
	}
}

func TestErrorBodiesInOtherShapesAreReadable(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, jsonReply(401, `{"error":{"code":"missing_token","message":"token required"}}`))
	_, err := newClient(t, rec).Health(context.Background())
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "missing_token", pe.Code)
	require.Equal(t, "token required", pe.Message)

	rec = newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream exploded\nstack trace…", http.StatusBadGateway)
	})
	_, err = newClient(t, rec).Health(context.Background())
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "upstream exploded", pe.Message)
	require.True(t, pe.Retryable())
}

func TestNetworkFailureIsRetryableAndNeverShowsTheToken(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close() // nothing listens there any more
	c, err := pinchtab.New(addr, testToken)
	require.NoError(t, err)
	_, err = c.Navigate(context.Background(), "T1", "http://x/", nil)
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.True(t, pe.Network())
	require.True(t, pe.Retryable())
	require.NotContains(t, err.Error(), testToken)
}

func TestCancellationReachesTheRequest(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	serverSawCancel := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
			close(serverSawCancel)
		case <-time.After(10 * time.Second):
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := newClient(t, rec).Act(ctx, "T1", pinchtab.Action{Kind: "click", Selector: "#slow"})
	require.ErrorIs(t, err, context.Canceled)
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.False(t, pe.Retryable(), "a cancelled request is not retried")
	select {
	case <-serverSawCancel:
	case <-time.After(5 * time.Second):
		t.Fatal("the instance never saw the request cancelled")
	}
}

func TestDeadlineReachesTheRequest(t *testing.T) {
	t.Parallel()
	serverSawCancel := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(serverSawCancel)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := newClient(t, rec).Text(ctx, "T1", "", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.True(t, pe.Retryable(), "a timeout may succeed when retried")
	<-serverSawCancel
}

func TestInvalidParamsFailWithoutARequest(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, jsonReply(200, `{}`))
	_, err := newClient(t, rec).Act(context.Background(), "T1", pinchtab.Action{Kind: "fill", Params: json.RawMessage(`["not","an","object"]`)})
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 400, pe.Status)
	require.False(t, pe.Retryable())
	require.Zero(t, rec.count())
}

func TestNonJSONBodiesBecomeJSONStrings(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "plain words")
	})
	res, err := newClient(t, rec).Read(context.Background(), "T1", "title", nil)
	require.NoError(t, err)
	require.JSONEq(t, `"plain words"`, string(res))
}

func TestScreenshotReturnsRawBytesOrDecodesBase64(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\nfake-image-bytes")
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("raw") == "true" && r.URL.Query().Get("format") == "png" {
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(png)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"format": "jpeg", "base64": base64.StdEncoding.EncodeToString(png)})
	})
	c := newClient(t, rec)
	bin, err := c.Screenshot(context.Background(), "T1", url.Values{"format": {"png"}})
	require.NoError(t, err)
	require.Equal(t, "image/png", bin.ContentType)
	require.Equal(t, png, bin.Data)
	require.Equal(t, "/tabs/T1/screenshot", rec.last(t).Path)

	bin, err = c.Screenshot(context.Background(), "T1", nil)
	require.NoError(t, err)
	require.Equal(t, png, bin.Data, "a base64 answer is decoded")
	require.True(t, strings.HasPrefix(bin.ContentType, "image/"))
}

func TestNewRefusesBadBaseURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "ftp://x", "localhost:9867", "http://"} {
		_, err := pinchtab.New(u, "t")
		require.Error(t, err, u)
	}
}

// TestAFaultSaysWhetherTheRequestMayHaveRun meets the failures of a real
// connection, and PinchTab's own answers, and asks each whether the
// instance may have acted on the request.
func TestAFaultSaysWhetherTheRequestMayHaveRun(t *testing.T) {
	t.Parallel()
	click := func(t *testing.T, url string, params json.RawMessage) *pinchtab.Error {
		t.Helper()
		c, err := pinchtab.New(url, testToken)
		require.NoError(t, err)
		_, err = c.Act(context.Background(), "T1", pinchtab.Action{Kind: "click", Selector: "#go", Params: params})
		var pe *pinchtab.Error
		require.ErrorAs(t, err, &pe)
		return pe
	}
	hijacked := func(t *testing.T, readBody bool) (*httptest.Server, *atomic.Int32) {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			if readBody {
				_, _ = io.Copy(io.Discard, r.Body) // the instance has the request, and acts
			}
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close() // and its process goes away before it answers
			}
		}))
		t.Cleanup(srv.Close)
		return srv, &n
	}

	t.Run("a refused connection never reached the instance", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		pe := click(t, srv.URL, nil)
		require.True(t, pe.InstanceFault())
		require.False(t, pe.Sent)
		require.False(t, pe.MayHaveRun())
	})
	t.Run("a connection that broke after the request was written may have run it", func(t *testing.T) {
		t.Parallel()
		srv, n := hijacked(t, true)
		pe := click(t, srv.URL, nil)
		require.True(t, pe.InstanceFault(), "the instance's fault")
		require.True(t, pe.Sent)
		require.True(t, pe.MayHaveRun())
		require.Equal(t, int32(1), n.Load(), "sent once: net/http does not send a POST again")
	})
	t.Run("a connection that broke while the request was written did not", func(t *testing.T) {
		t.Parallel()
		srv, _ := hijacked(t, false)
		c, err := pinchtab.New(srv.URL, testToken)
		require.NoError(t, err)
		// Far more than the connection's buffers hold: the instance
		// closes it, unread, long before the last byte is written.
		big := []byte(`{"kind":"fill","selector":"#go","text":"` + strings.Repeat("x", 24<<20) + `"}`)
		_, err = c.Do(context.Background(), "action", http.MethodPost, "/tabs/T1/action", nil, big)
		var pe *pinchtab.Error
		require.ErrorAs(t, err, &pe)
		require.True(t, pe.InstanceFault(), pe.Error())
		require.False(t, pe.Sent, pe.Error())
		require.False(t, pe.MayHaveRun())
	})
	t.Run("a keep-alive connection the instance had closed as idle did not", func(t *testing.T) {
		t.Parallel()
		pe := &pinchtab.Error{Op: "action", Method: "POST", Path: "/tabs/T1/action", Sent: true,
			Err: errors.New("http: server closed idle connection")}
		require.True(t, pe.InstanceFault())
		require.False(t, pe.MayHaveRun())
	})

	// PinchTab's answers, as its handlers write them.
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		fault, ran bool
	}{
		// Its proxy, when the browser behind a server died while it acted.
		{"a server whose browser died mid-action", 502,
			`{"error":"instance unreachable: Post \"http://127.0.0.1:9868/tabs/T1/action\": EOF","code":"error"}`, true, true},
		// Its proxy, when the browser behind a server refused the connection.
		{"a server whose browser refused the connection", 502,
			`{"error":"instance unreachable: Post \"http://127.0.0.1:9868/tabs/T1/action\": dial tcp 127.0.0.1:9868: connect: connection refused","code":"error"}`, true, false},
		{"a 502 of unknown origin", 502, `<html>Bad Gateway</html>`, true, true},
		// A bridge whose browser is restarting answers so before it acts.
		{"a draining bridge", 503,
			`{"error":"browser restart in progress; retry shortly","code":"browser_draining","retryable":true,"details":{"retryAfterSeconds":2}}`, true, false},
		{"a server whose browser is not running", 503,
			`{"error":"instance \"inst_0001\" is not running (status: starting)","code":"error"}`, true, false},
		// Not PinchTab's answer: a proxy in front of it, which may have
		// passed the request on before its connection to PinchTab broke.
		{"a 503 of unknown origin", 503,
			`upstream connect error or disconnect/reset before headers. reset reason: connection termination`, true, true},
		{"a bad token", 401, `{"error":"unauthorized","code":"bad_token"}`, true, false},
		{"a server without a token", 503, `{"error":"server token is not configured","code":"token_required"}`, true, false},
		{"a launch that failed", 502, `{"error":"no browser target could be launched","code":"browser_target_unavailable","retryable":true}`, true, false},
		// The action ran and failed: not an instance fault at all.
		{"an action that failed", 500, `{"error":"action click: boom","code":"action_failed","retryable":true}`, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, jsonReply(tc.status, tc.body))
			pe := click(t, rec.srv.URL, nil)
			require.Equal(t, tc.fault, pe.InstanceFault(), pe.Error())
			require.Equal(t, tc.ran, pe.MayHaveRun(), pe.Error())
		})
	}
}
