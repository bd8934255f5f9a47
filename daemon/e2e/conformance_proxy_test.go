package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// suiteProxy is how the conformance suite reaches flyd, whose /mcp wants
// a token the suite does not send: a reverse proxy to target that adds
// the token and keeps the suite's Host, a loopback name. rt is its
// transport (nil for the default).
//
// It serves each request in full duplex. flyd reads a POST whole and may
// answer at once, while the proxy's transport still reads the request
// body once more after its declared length, to see it end
// (net/http/transfer.go, transferWriter.writeBody). An HTTP/1 server
// drains and closes a request body when the answer's headers go out
// (net/http/server.go, chunkWriter.writeHeader); that last read then
// fails with "invalid Read on closed Body", and the transport drops its
// connection to flyd (transport.go, persistConn.writeLoop) with the
// answer half streamed. Under load that read comes late enough: the
// suite's tools-call-with-progress got its first progress event, then
// its stream ended, and flyd's result went nowhere (no event store: the
// client cannot resume). Full duplex leaves the body to the transport.
func suiteProxy(target *url.URL, token string, rt http.RoundTripper) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the suite's Host, a loopback name
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1, // SSE streams pass through as they come
		Transport:     rt,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, "proxy: full duplex: "+err.Error(), http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// TestSuiteProxyKeepsEarlyAnswers: a streamed answer that its server
// starts as soon as it has read the request reaches the client whole
// through the suite's proxy, even when the proxy's transport checks the
// request body's end after the answer's first event went out, which is
// when it does under load (see suiteProxy). The test holds that check
// until the client has the answer's headers.
func TestSuiteProxyKeepsEarlyAnswers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last := make(chan struct{}) // lets the server send its last event
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil { // the whole request first, as flyd does
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-last:
			fmt.Fprint(w, "data: last\n\n")
		case <-r.Context().Done():
		}
	}))
	defer server.Close()
	target, err := url.Parse(server.URL)
	if err != nil {
		t.Fatal(err)
	}

	// The proxy's transport to the server: its connections say when
	// they close, and its requests' bodies hold the read after their end
	// until headers is closed, then report how it went on checked.
	headers := make(chan struct{})
	checked := make(chan error, 1)
	dropped := make(chan struct{})
	var dropOnce sync.Once
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &watchedConn{Conn: c, closed: func() { dropOnce.Do(func() { close(dropped) }) }}, nil
	}}
	defer tr.CloseIdleConnections()
	rt := roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			r = r.Clone(r.Context())
			r.Body = &heldEnd{ReadCloser: r.Body, left: r.ContentLength, hold: headers, checked: checked}
		}
		return tr.RoundTrip(r)
	})
	proxy := httptest.NewServer(suiteProxy(target, "token", rt))
	defer proxy.Close()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewScanner(resp.Body)
	next := func() (string, error) {
		for events.Scan() {
			if data, ok := strings.CutPrefix(events.Text(), "data: "); ok {
				return data, nil
			}
		}
		if events.Err() == nil {
			return "", io.EOF
		}
		return "", events.Err()
	}
	if got, err := next(); got != "first" {
		t.Fatalf("the answer's first event = %q (%v), want %q", got, err, "first")
	}
	close(headers)
	var end error
	select {
	case end = <-checked:
	case <-ctx.Done():
		t.Fatal("the proxy's transport never read the request body's end")
	}
	if end != nil && !errors.Is(end, io.EOF) {
		// It drops its connection to the server next: let that happen
		// before the last event, which would otherwise race it.
		select {
		case <-dropped:
		case <-ctx.Done():
			t.Fatalf("reading the request body's end failed (%v), yet the connection stayed", end)
		}
	}
	close(last)
	if got, err := next(); got != "last" {
		t.Fatalf("the answer's last event = %q (%v), want %q: the proxy cut the stream (reading the request body's end: %v)", got, err, "last", end)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// heldEnd is a request body of left bytes whose read after its end
// waits for hold, and whose outcome goes to checked.
type heldEnd struct {
	io.ReadCloser
	left    int64
	hold    <-chan struct{}
	checked chan<- error
	ended   bool
}

func (b *heldEnd) Read(p []byte) (int, error) {
	if !b.ended {
		n, err := b.ReadCloser.Read(p)
		b.left -= int64(n)
		b.ended = err == io.EOF || b.left <= 0
		return n, err
	}
	<-b.hold
	n, err := b.ReadCloser.Read(p)
	select {
	case b.checked <- err:
	default:
	}
	return n, err
}

// watchedConn calls closed when it is closed.
type watchedConn struct {
	net.Conn
	closed func()
}

func (c *watchedConn) Close() error {
	c.closed()
	return c.Conn.Close()
}
