package localapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/index"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/logkey"
	"github.com/fly-dev/fly/internal/wire"
)

// ErrUnavailable is what a Config function returns when the part it
// reaches is not running (no upstreams, no loopback listener): the route
// answers 503 or 409 with the error's text.
var ErrUnavailable = errors.New("unavailable")

// Config is what the API is given. Functions stand for the parts of the
// daemon that start after the API is built, or that only it may decide.
type Config struct {
	Runs *runs.Engine

	// Status is the status document: GET /v1/status and every event.
	Status func() wire.Status
	// Workspace opens the workspace of dir for one request: its root and
	// warm index; release gives it back.
	Workspace func(dir string) (root string, idx *index.Index, release func(), err error)
	// RestartUpstream restarts the named upstream's instances and says
	// how many.
	RestartUpstream func(name string) (int, error)
	// RotateToken replaces the loopback listener's token.
	RotateToken func() (string, error)
	// Trusted reports whether a request comes from a peer checked to be
	// this user (the Unix socket): only such a peer may rotate the token.
	Trusted func(r *http.Request) bool
	// Shutdown asks flyd to stop, as SIGTERM does (or with its runs, as
	// the request says); it returns at once.
	Shutdown func(wire.ShutdownRequest)
	// Apps lists the apps found outside fly, of a workspace root ("" for
	// all); nil for none.
	Apps func(root string) []wire.App

	MaxFileBytes int64         // grep skips larger files
	WriteTimeout time.Duration // of one write of a stream
	Heartbeat    time.Duration // of an idle stream (default 15s)
	Log          *slog.Logger
}

// API is flyd's local HTTP API. Its handlers may run concurrently.
type API struct {
	cfg     Config
	changes *changes

	followersCut atomic.Int64 // log followers cut for missing a write deadline
	lineCaches   sync.Map     // run id → *lineCache: a live run's NDJSON lines, shared by its followers
}

// New returns the API for cfg. It does no I/O.
func New(cfg Config) *API {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &API{cfg: cfg, changes: newChanges()}
}

// Register adds every route of the API to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+wire.RouteStatus, a.status)
	mux.HandleFunc("GET "+wire.RouteGrep, a.grep)
	mux.HandleFunc("POST "+wire.RouteUpstreams+"{name}/restart", a.restartUpstream)
	mux.HandleFunc("POST "+wire.RouteTokenRotate, a.rotateToken)
	mux.HandleFunc("POST "+wire.RouteShutdown, a.shutdown)
	mux.HandleFunc("GET "+wire.RouteRuns, a.route(a.list))
	mux.HandleFunc("GET "+wire.RouteRun, a.route(a.get))
	mux.HandleFunc("POST "+wire.RouteRunStop, a.route(a.stop))
	mux.HandleFunc("POST "+wire.RouteRunReload, a.route(a.reload))
	mux.HandleFunc("GET "+wire.RouteEvents, a.route(a.events))
	mux.HandleFunc("GET "+wire.RouteRunLogs, a.route(a.logs))
	mux.HandleFunc("GET "+wire.RouteRunErrors, a.route(a.errors))
	mux.HandleFunc("GET "+wire.RouteRunScreenshot, a.route(a.screenshot))
	addDashboard(mux)
}

// Changed tells the event streams that the status changed. It never
// blocks.
func (a *API) Changed() { a.changes.bump() }

// NextChange returns a channel closed at the next change of the status
// document (what /v1/events sends): take it before looking at the
// status, so that no change falls between the look and the wait.
func (a *API) NextChange() <-chan struct{} { return a.changes.wait() }

// RunChanged is called at every state change of a run: the status
// changed, and an ended run's shared log lines are dropped.
func (a *API) RunChanged(r *runs.Run) {
	a.changes.bump()
	if !r.Record().State.Live() {
		a.lineCaches.Delete(r.ID())
	}
}

// Close ends every event stream: flyd is stopping.
func (a *API) Close() { a.changes.close() }

// FollowersCut is how many log followers were cut for missing a write
// deadline.
func (a *API) FollowersCut() int64 { return a.followersCut.Load() }

// Log attribute keys of the HTTP API.
const (
	logCID     = "cid"
	logMethod  = "method"
	logPath    = "path"
	logStatus  = "status"
	logElapsed = "elapsed_ms"
	logErr     = logkey.Error
)

var requestSeq atomic.Uint64

// apiError is an error with the HTTP status and the hint it is answered
// with.
type apiError struct {
	code int
	msg  string
	hint string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// errorReply is the body of every error answer of the HTTP API.
type errorReply struct {
	Error string `json:"error"`
	Hint  string `json:"hint,omitempty"`
}

// streamError ends a stream whose headers are already sent: it is
// logged, never answered.
type streamError struct{ err error }

func (e streamError) Error() string { return e.err.Error() }
func (e streamError) Unwrap() error { return e.err }

// route turns a handler's error into its JSON answer, the one place that
// does so, and logs the request.
func (a *API) route(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		err := h(w, r)
		status := http.StatusOK
		var se streamError
		var ae *apiError
		switch {
		case err == nil:
		case errors.As(err, &se):
			if errors.Is(err, os.ErrDeadlineExceeded) {
				a.followersCut.Add(1)
			}
		case errors.As(err, &ae):
			status = ae.code
			writeJSON(w, status, errorReply{Error: ae.msg, Hint: ae.hint})
		default:
			status = http.StatusInternalServerError
			writeJSON(w, status, errorReply{Error: err.Error()})
		}
		attrs := []any{logCID, fmt.Sprintf("h%x", requestSeq.Add(1)), logMethod, r.Method, logPath, r.URL.Path,
			logStatus, status, logElapsed, float64(time.Since(start).Microseconds()) / 1000}
		if err != nil {
			attrs = append(attrs, logErr, err.Error())
		}
		a.cfg.Log.Debug("http request", attrs...)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// onlyParams refuses query parameters other than names, and repeated ones.
func onlyParams(q url.Values, names ...string) error {
	for k, vs := range q {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		switch {
		case !known && len(names) == 0:
			return badRequest("unknown query parameter %q; this route takes none", k)
		case !known:
			return badRequest("unknown query parameter %q; this route takes %s", k, strings.Join(names, ", "))
		}
		if len(vs) != 1 {
			return badRequest("query parameter %q is given %d times", k, len(vs))
		}
	}
	return nil
}
