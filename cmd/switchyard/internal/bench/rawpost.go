// A lean HTTP/1.1 client for the submit, batch and e2e modes: the bench
// shares the machine with the server it measures, and net/http's client
// spends a goroutine hand-off each way per request (its connection's read
// and write loops) besides parsing every header into a map. Each worker
// here owns one kept-alive connection, writes its prebuilt request in one
// call and reads the answer on its own goroutine: what the figures then
// count is the server, not the client. https endpoints use net/http.

package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
)

// rawPoster posts one prebuilt request over a kept-alive connection it
// dials (again) when it has none.
type rawPoster struct {
	addr string
	req  []byte // request line, headers and body
	conn net.Conn
	br   *bufio.Reader
	body []byte // the last response's body, reused
	stop func() bool
}

// newRawPoster returns a poster of body to endpoint with the token, if
// any; ok is false for an endpoint it does not serve (not http://).
func newRawPoster(endpoint, token string, body []byte) (p *rawPoster, ok bool, err error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, false, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" || u.User != nil {
		return nil, false, nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", u.RequestURI(), u.Host, len(body))
	if token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", token)
	}
	b.WriteString("\r\n")
	b.Write(body)
	return &rawPoster{addr: addr, req: b.Bytes()}, true, nil
}

// post sends the request and returns the response's status and body (valid
// until the next post).
func (p *rawPoster) post(ctx context.Context) (int, []byte, error) {
	if p.conn == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", p.addr)
		if err != nil {
			return 0, nil, err
		}
		p.conn, p.br = c, bufio.NewReaderSize(c, 16<<10)
		p.stop = context.AfterFunc(ctx, func() { _ = c.Close() })
	}
	status, keep, err := p.roundTrip()
	if err != nil || !keep {
		p.close()
	}
	return status, p.body, err
}

func (p *rawPoster) close() {
	if p.conn != nil {
		p.stop()
		_ = p.conn.Close()
		p.conn = nil
	}
}

// roundTrip writes the request and reads the response: its status line,
// its headers (Content-Length, Transfer-Encoding and Connection are the
// ones that matter here) and its body.
func (p *rawPoster) roundTrip() (status int, keep bool, err error) {
	if _, err := p.conn.Write(p.req); err != nil {
		return 0, false, err
	}
	line, err := p.br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("not an HTTP response: %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, false, fmt.Errorf("status line %q: %w", line, err)
	}
	length, chunked, keep := -1, false, true
	for {
		h, err := p.br.ReadSlice('\n')
		if err != nil {
			return status, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, _ := bytes.Cut(h, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return status, false, fmt.Errorf("Content-Length %q: %w", value, err)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		}
	}
	switch {
	case chunked:
		// Large answers (errors, mostly): read them whole, then start
		// again on a new connection rather than parse the trailer.
		p.body, err = io.ReadAll(httputil.NewChunkedReader(p.br))
		return status, false, err
	case length < 0:
		p.body, err = io.ReadAll(p.br)
		return status, false, err
	}
	if cap(p.body) < length {
		p.body = make([]byte, length)
	}
	p.body = p.body[:length]
	if _, err := io.ReadFull(p.br, p.body); err != nil {
		return status, false, err
	}
	return status, keep, nil
}

// poster posts a worker's request: over a rawPoster, or net/http's client
// for endpoints a rawPoster does not serve.
type poster struct {
	raw      *rawPoster
	hc       *http.Client
	endpoint string
	reqBody  []byte
}

func newPoster(hc *http.Client, endpoint, token string, body []byte) (*poster, error) {
	raw, ok, err := newRawPoster(endpoint, token, body)
	if err != nil {
		return nil, err
	}
	if ok {
		return &poster{raw: raw}, nil
	}
	return &poster{hc: hc, endpoint: endpoint, reqBody: body}, nil
}

// post returns the response's status and body (valid until the next post).
func (p *poster) post(ctx context.Context) (int, []byte, error) {
	if p.raw != nil {
		return p.raw.post(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(p.reqBody))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	return res.StatusCode, data, err
}

func (p *poster) close() {
	if p.raw != nil {
		p.raw.close()
	}
}
