package main

import (
	"bytes"
	"context"
	"regexp"
	"sync"
	"testing"
	"time"
)

// The commands that serve (serve, instance) start in the test's own process
// through one starter, which returns once the command says where it listens:
// its output is watched as it is written, not polled.

// serveStartTimeout bounds how long a test waits for `switchyard serve` (or
// `instance`) to say where it listens, or to stop. It is a bound, not a claim
// about speed: on a cold compilation cache the WebAssembly policies compile
// for seconds, and tens of seconds on a busy two-core machine.
const serveStartTimeout = 2 * time.Minute

var (
	// servingLine is what serve prints once it listens: the GraphQL URL.
	servingLine = regexp.MustCompile(`GraphQL at (http://\S+/graphql)`)
	// instanceLine is what instance prints once it listens: its base URL.
	instanceLine = regexp.MustCompile(`instance listening on (http://\S+)`)
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// readyWriter is a command's standard output: it sends the first match of
// ready's group on url.
type readyWriter struct {
	syncBuffer
	ready *regexp.Regexp
	url   chan string
	sent  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if !w.sent {
		if m := w.ready.FindSubmatch(w.b.Bytes()); m != nil {
			w.sent = true
			w.url <- string(m[1])
		}
	}
	return n, err
}

// served is a command running in the test's process.
type served struct {
	URL  string      // the URL it said it listens at
	Logs *syncBuffer // its standard error: the log

	cancel context.CancelFunc
	done   chan int
	once   sync.Once
	code   int
}

// startServe runs `switchyard serve args...`; see start.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	return start(t, servingLine, append([]string{"serve"}, args...)...)
}

// start runs `switchyard args...` in the test's process until Stop or the
// end of the test, and returns once the command's output matches ready. It
// fails the test when the command exits first or does not match within
// serveStartTimeout.
func start(t *testing.T, ready *regexp.Regexp, args ...string) *served {
	t.Helper()
	out := &readyWriter{ready: ready, url: make(chan string, 1)}
	s := &served{Logs: &syncBuffer{}, done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- run(ctx, args, out, s.Logs) }()
	t.Cleanup(func() { s.Stop(t) })
	select {
	case s.URL = <-out.url:
		return s
	case code := <-s.done:
		s.once.Do(func() { s.code = code })
		t.Fatalf("switchyard %s exited with %d before it listened; its log:\n%s", args[0], code, s.Logs)
	case <-time.After(serveStartTimeout):
		t.Fatalf("switchyard %s did not listen within %v; its log:\n%s", args[0], serveStartTimeout, s.Logs)
	}
	return nil
}

// Stop stops the command as SIGINT does and returns its exit code, failing
// the test if it does not stop within serveStartTimeout. Later calls return
// the same code.
func (s *served) Stop(t testing.TB) int {
	t.Helper()
	s.once.Do(func() {
		s.cancel()
		select {
		case s.code = <-s.done:
		case <-time.After(serveStartTimeout):
			s.code = -1
			t.Errorf("switchyard did not stop within %v; its log:\n%s", serveStartTimeout, s.Logs)
		}
	})
	return s.code
}
