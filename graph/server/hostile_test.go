package server_test

// A hostile-client test: while clients send oversized bodies, deep queries,
// 10,000 aliases, repeated fields and fragment bombs, hold WebSockets open
// without finishing connection_init (or dribble it byte by byte), open far
// more subscriptions than a connection may hold and send malformed
// graphql-ws frames, a well-behaved client keeps getting prompt answers and
// every attack gets its refusal.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
)

// tally counts what the attackers got back.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (t *tally) add(k string) {
	t.mu.Lock()
	t.m[k]++
	t.mu.Unlock()
}

func (t *tally) get(k string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[k]
}

// loop runs f every pause until ctx ends.
func loop(ctx context.Context, wg *sync.WaitGroup, pause time.Duration, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			f()
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}()
}

// post sends a raw body and returns the status and the first error code.
func post(ctx context.Context, url, token string, body io.Reader, size int64) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return 0, err.Error()
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "transport"
	}
	defer res.Body.Close()
	var out client.Response
	data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	_ = json.Unmarshal(data, &out)
	if len(out.Errors) > 0 {
		return res.StatusCode, out.Errors[0].Code()
	}
	return res.StatusCode, ""
}

func queryBody(q string) string {
	b, _ := json.Marshal(map[string]string{"query": q})
	return string(b)
}

// wsHandshake opens a raw TCP connection and upgrades it to a WebSocket of
// subprotocol proto, without sending anything more.
func wsHandshake(ctx context.Context, addr, proto string) (net.Conn, *bufio.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	fmt.Fprintf(conn, "GET /graphql HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n", addr, base64.StdEncoding.EncodeToString(key), proto)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, nil, fmt.Errorf("upgrade: %s", res.Status)
	}
	return conn, br, nil
}

// frameHeader is a client's masked text frame header for a payload of n
// bytes (n < 126), with the mask 0.
func frameHeader(n int) []byte { return []byte{0x81, 0x80 | byte(n), 0, 0, 0, 0} }

func TestHostileClientsDoNotSlowAWellBehavedOne(t *testing.T) {
	// Not parallel: the attacks load the CPU, which would make the
	// package's timing-sensitive tests (keepalives) fail, and theirs would
	// blur this one's measure. It runs alone, before the parallel tests.
	tokens, secrets := withTokens(t, [3]string{"good", "reader", ""}, [3]string{"evil", "admin", ""})
	b := setup(t, tokens, succeed)
	good := b.clientWith(secrets["good"])
	evil := secrets["evil"]
	// The good client's latency before the attacks: on a machine busy with
	// other work, the bound below scales with it.
	baseline := goodLatencies(t, good, 20)
	url := b.base + "/graphql"
	addr := strings.TrimPrefix(b.base, "http://")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	got := &tally{m: map[string]int{}}

	// Oversized bodies: declared (refused before a byte is read) and
	// chunked (read up to the limit).
	big := strings.Repeat("x", 5<<20)
	loop(ctx, &wg, 50*time.Millisecond, func() {
		status, _ := post(ctx, url, evil, strings.NewReader(big), int64(len(big)))
		got.add(fmt.Sprint("declared-big ", status))
	})
	loop(ctx, &wg, 50*time.Millisecond, func() {
		status, _ := post(ctx, url, evil, io.MultiReader(strings.NewReader(big)), -1)
		got.add(fmt.Sprint("chunked-big ", status))
	})
	// Deep, wide and repetitive queries.
	deep := "{ tasks { nodes { " + strings.Repeat("children { ", 40) + "id" + strings.Repeat(" }", 40) + " } } }"
	var aliases, repeats, typenames strings.Builder
	aliases.WriteString("{")
	repeats.WriteString("{")
	typenames.WriteString("{")
	for i := 0; i < 10_000; i++ {
		fmt.Fprintf(&aliases, " a%d: stats { submitted }", i)
		repeats.WriteString(" stats { submitted }")
		fmt.Fprintf(&typenames, " a%d: __typename", i)
	}
	aliases.WriteString("}")
	repeats.WriteString("}")
	typenames.WriteString("}")
	var bomb strings.Builder
	bomb.WriteString("query { ...F0 } ")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&bomb, "fragment F%d on Query { ...F%d ...F%d } ", i, i+1, i+1)
	}
	bomb.WriteString("fragment F30 on Query { stats { submitted } }")
	for name, q := range map[string]string{"deep": deep, "aliases": aliases.String(), "repeats": repeats.String(),
		"typenames": typenames.String(), "bomb": bomb.String()} {
		body := queryBody(q)
		loop(ctx, &wg, 50*time.Millisecond, func() {
			status, code := post(ctx, url, evil, strings.NewReader(body), int64(len(body)))
			got.add(fmt.Sprintf("%s %d %s", name, status, code))
		})
	}
	// Slowloris WebSockets: connection_init never sent, or dribbled one
	// byte at a time; and HTTP headers dribbled.
	var slowOpen atomic.Int64
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			conn, _, err := wsHandshake(ctx, addr, client.TransportWS)
			if err != nil {
				got.add("slowloris handshake failed")
				return
			}
			defer conn.Close()
			slowOpen.Add(1)
			if i%2 == 0 {
				<-ctx.Done() // never a word
				return
			}
			init := []byte(`{"type":"connection_init","payload":{}}`)
			_, _ = conn.Write(frameHeader(len(init)))
			for _, c := range init {
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := conn.Write([]byte{c}); err != nil {
					return
				}
			}
		}(i)
	}
	loop(ctx, &wg, 200*time.Millisecond, func() {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer conn.Close()
		for _, c := range []byte("POST /graphql HTTP/1.1\r\nHost: x\r\n") {
			if ctx.Err() != nil {
				return
			}
			_, _ = conn.Write([]byte{c})
			time.Sleep(20 * time.Millisecond)
		}
	})
	// Many subscriptions on one connection: 150, of which 100 may run. It
	// goes to its end whatever the others do, however long the attacks and
	// the machine's load make its 150 round trips take: the promise is the
	// count, not the pace, so its bound is one a busy machine keeps (30 s,
	// ctxFor's, was not: under the race detector and other work the round
	// trips outlasted it, and the subscriptions after it failed).
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := b.clientWith(evil)
		conn, err := c.Dial(ctx, client.DialOptions{})
		if err != nil {
			got.add("subscriber dial failed")
			return
		}
		defer conn.Close()
		for i := 0; i < 150; i++ {
			s, err := conn.Subscribe(ctx, `subscription { stats(intervalMs: 60000) { submitted } }`, nil)
			if err != nil {
				got.add("subscribe failed: " + err.Error())
				continue
			}
			m, err := s.Next(ctx)
			switch {
			case err != nil:
				got.add("subscription: " + err.Error())
			case len(m.Errors) > 0:
				got.add("subscription " + m.Errors[0].Code())
			default:
				got.add("subscription ok")
			}
		}
	}()
	// Malformed graphql-ws frames, over both subprotocols.
	malformed := [][]byte{
		[]byte(`not json at all`), []byte(`{"type":"subscribe","id":"1","payload":{"query":"{ stats { submitted } }"}}`), // before init
		[]byte(`{"type":"connection_init","payload":"a string"}`), []byte(`{"type":42}`), []byte(`[]`), []byte(`{"type":"connection_init"`),
		[]byte(`{"type":"start","id":` + strings.Repeat("9", 5000) + `}`), []byte(strings.Repeat("[", 100_000)),
	}
	loop(ctx, &wg, 30*time.Millisecond, func() {
		for _, proto := range []string{client.TransportWS, client.LegacyWS} {
			for _, frame := range malformed {
				ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/graphql", &websocket.DialOptions{Subprotocols: []string{proto}})
				if err != nil {
					if ctx.Err() == nil {
						got.add("malformed dial failed: " + err.Error())
					}
					return
				}
				_ = ws.Write(ctx, websocket.MessageText, frame)
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				for {
					if _, _, err := ws.Read(rctx); err != nil {
						switch {
						case rctx.Err() == nil:
							got.add("malformed closed")
						case ctx.Err() == nil:
							got.add("malformed left open")
						}
						break
					}
				}
				cancel()
				ws.CloseNow()
			}
		}
	})

	// Let the attacks get going, then measure the good client. The p90, not
	// the maximum: a single slow answer on a busy machine is not starvation.
	time.Sleep(500 * time.Millisecond)
	lat := goodLatencies(t, good, 50)
	p50, p90 := lat[len(lat)/2], lat[len(lat)*9/10]
	base := baseline[len(baseline)*9/10]
	t.Logf("well-behaved client: p90 %s before the attacks; under attack p50 %s, p90 %s, max %s", base, p50, p90, lat[len(lat)-1])
	// The promise is that the attacks do not starve the good client — a
	// server that let them hold its readers, its parser or its lock would
	// keep it waiting for seconds, until its deadline — not a pace: on a
	// machine busy with other work (a CI runner's other packages), the p90
	// measured 27–75 ms under the attacks at a load of 14–18 on two cores,
	// and passed 200 ms at a load of 27.
	bound := time.Second
	if raceEnabled {
		bound = 5 * time.Second // the race detector slows the attacks' parsing and validation 5-20×
	}
	bound = max(bound, 20*base)
	require.Less(t, p90, bound, "the well-behaved client is answered promptly under attack")

	// A subscription of the good client still works too.
	conn, err := good.Dial(ctxFor(t), client.DialOptions{})
	require.NoError(t, err)
	sub, err := conn.Subscribe(ctxFor(t), `subscription { stats(intervalMs: 100) { submitted } }`, nil)
	require.NoError(t, err)
	_, err = sub.Next(ctxFor(t))
	require.NoError(t, err)
	conn.Close()

	stop()
	wg.Wait()
	got.mu.Lock()
	t.Logf("what the attackers got: %v", got.m)
	got.mu.Unlock()
	require.Positive(t, got.get("declared-big 413"), "declared oversized bodies: 413")
	require.Positive(t, got.get("chunked-big 413"), "chunked oversized bodies: 413")
	require.Positive(t, got.get("deep 200 LIMIT"), "deep queries: LIMIT")
	require.Positive(t, got.get("repeats 200 LIMIT"), "repeated fields: LIMIT before validation")
	require.Positive(t, got.get("bomb 200 LIMIT"), "fragment bombs: LIMIT")
	require.Zero(t, got.get("aliases 200 "), "10,000 aliases of a list are not executed")
	require.Positive(t, got.get("typenames 200 LIMIT"), "10,000 aliases of __typename: LIMIT before gqlgen collects them")
	require.Equal(t, 100, got.get("subscription ok"), "a connection holds 100 subscriptions (what the attackers got: %v)", got.m)
	require.Equal(t, 50, got.get("subscription LIMIT"), "and no more (what the attackers got: %v)", got.m)
	require.Positive(t, got.get("malformed closed"), "malformed frames close their socket")
	require.Zero(t, got.get("malformed left open"), "every malformed frame closes its socket")
	for k := range got.m {
		require.NotContains(t, k, "dial failed", "the server accepts WebSockets throughout")
	}
	require.Equal(t, int64(20), slowOpen.Load())
	require.NoError(t, good.Do(ctxFor(t), `{ stats { submitted } }`, nil, nil), "the server is still up")
}

// goodLatencies runs n small queries as the good client, one after another,
// and returns their latencies, sorted.
func goodLatencies(t *testing.T, good *client.Client, n int) []time.Duration {
	t.Helper()
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		var out struct {
			Stats struct{ Submitted int }
			Lanes []struct{ Name string }
		}
		require.NoError(t, good.Do(ctxFor(t), `{ stats { submitted } lanes { name } }`, nil, &out))
		require.Len(t, out.Lanes, 4)
		lat = append(lat, time.Since(start))
		time.Sleep(10 * time.Millisecond) // a well-behaved client's pace, spread over the attacks
	}
	slices.Sort(lat)
	return lat
}
