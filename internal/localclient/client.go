// Package localclient is the client of flyd's local API: the /v1 routes
// that flyd serves on the user's socket (internal/wire names them and
// their documents). It owns dialing the socket (after checking that it
// is the user's, internal/paths), the version handshake, and turning
// flyd's error answers into errors that carry flyd's hint; it has one
// method per endpoint, returning internal/wire's types.
//
// It does not own what a client prints, how a run id prefix is resolved,
// or starting flyd when none answers (flyctl and the shim do). It does
// not speak MCP (RouteMCP and RouteStreamable are the shim's and the
// editors'). It imports only the standard library, internal/ipc (the
// socket, or the named pipe on Windows), internal/paths and internal/wire.
package localclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
)

// Client speaks to the flyd on one socket. Its zero value is not usable:
// make one with New. It is safe for concurrent use.
type Client struct {
	socket string

	once sync.Once
	http *http.Client

	onVersion func(header string) // see OnVersion
}

// New returns a client of the flyd listening on socket. It connects only
// when a method is called.
func New(socket string) *Client {
	return &Client{socket: socket}
}

// httpClient is the client's HTTP client, made on first use: every
// connection is a dial of the socket, after paths.CheckSocketTrust.
func (c *Client) httpClient() *http.Client {
	c.once.Do(func() {
		c.http = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				if err := paths.CheckSocketTrust(c.socket); err != nil {
					return nil, err
				}
				return ipc.Dial(ctx, c.socket)
			},
		}}
	})
	return c.http
}

// OnVersion makes the client call f with the HeaderVersion value of
// every answer of a flyd of this protocol (f may see a release older or
// newer than this build's, and tell the user). Call it before any other
// method.
func (c *Client) OnVersion(f func(header string)) { c.onVersion = f }

// CloseIdleConnections closes the connections kept open for the next
// call; a client used once and dropped calls it.
func (c *Client) CloseIdleConnections() { c.httpClient().CloseIdleConnections() }

// ErrNoDaemon is wrapped by the error of a call when nothing listens on
// the socket. A caller that waits for flyd (a log follow that lost it)
// retries on it.
var ErrNoDaemon = errors.New("flyd is not running")

// APIError is an error answer of flyd: its HTTP status, its message and
// the hint that says what to do.
type APIError struct {
	Status  int
	Message string
	Hint    string
}

func (e *APIError) Error() string {
	if e.Hint != "" {
		return e.Message + "; " + e.Hint
	}
	return e.Message
}

// IsNotFound reports whether err is flyd's answer that what was named
// (a run, an upstream) does not exist.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// maxErrorBody bounds the error answer read into an APIError.
const maxErrorBody = 16 << 10

// send sends method route?query to flyd and returns the response of a
// 2xx answer, whose body the caller closes. Dial failures, a daemon of
// another protocol (when checkPeer) and error answers become errors with
// a hint; it is the one place that does so.
func (c *Client) send(ctx context.Context, method, route string, query url.Values, checkPeer bool) (*http.Response, error) {
	u := "http://flyd" + route
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(wire.HeaderVersion, wire.VersionHeader())
	resp, err := c.httpClient().Do(req)
	if err != nil {
		if ipc.NoListener(err) {
			return nil, fmt.Errorf("%w (no daemon on %s); try: flyctl service start, or run it in the foreground with: flyd run", ErrNoDaemon, c.socket)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("reach flyd on %s: %w", c.socket, err)
	}
	if checkPeer {
		if err := wire.CheckPeer("flyctl", "flyd", resp.Header.Get(wire.HeaderVersion)); err != nil {
			resp.Body.Close()
			return nil, err
		}
		if c.onVersion != nil {
			c.onVersion(resp.Header.Get(wire.HeaderVersion))
		}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, apiError(resp)
	}
	return resp, nil
}

// apiError reads an error answer: flyd's {"error", "hint"}, else its
// text, else its status.
func apiError(resp *http.Response) *APIError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{Status: resp.StatusCode}
	var reply struct {
		Error string `json:"error"`
		Hint  string `json:"hint"`
	}
	if json.Unmarshal(b, &reply) == nil && reply.Error != "" {
		e.Message, e.Hint = reply.Error, reply.Hint
	} else if e.Message = strings.TrimSpace(string(b)); e.Message == "" {
		e.Message = "flyd answered " + resp.Status
	}
	return e
}

// do is send to a flyd of this protocol.
func (c *Client) do(ctx context.Context, method, route string, query url.Values) (*http.Response, error) {
	return c.send(ctx, method, route, query, true)
}

// call sends method route?query and decodes the JSON answer into v.
func (c *Client) call(ctx context.Context, method, route string, query url.Values, v any) error {
	resp, err := c.do(ctx, method, route, query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("read flyd's answer to %s %s: %w", method, route, err)
	}
	return nil
}

// runRoute fills a run route's {id}.
func runRoute(route, id string) string {
	return strings.Replace(route, "{id}", url.PathEscape(id), 1)
}
