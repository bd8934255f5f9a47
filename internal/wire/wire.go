// Package wire holds the small contract between flyd and its clients
// (the shim and flyctl): version numbers, HTTP routes and header names.
// It owns no behaviour. It imports only the standard library.
package wire

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MCPRevisions are the MCP revisions flyd knows, oldest first: those it
// serves and those an upstream's "protocol" may pin.
var MCPRevisions = []string{"2024-11-05", "2025-03-26", BatchlessRevision, "2025-11-25", SessionlessRevision}

// BatchlessRevision is the first MCP revision without JSON-RPC batches:
// a session that negotiated it or later sends one message per request.
const BatchlessRevision = "2025-06-18"

// SessionlessRevision is the first MCP revision without the initialize
// handshake and its session: each request says its revision and client
// in its _meta, and notifications come on subscriptions/listen streams.
const SessionlessRevision = "2026-07-28"

// IsSessionless reports whether an MCP revision is SessionlessRevision or
// later. Revisions are dates, so they order as strings.
func IsSessionless(revision string) bool { return revision >= SessionlessRevision }

// DefaultListen is the loopback address flyd listens on for HTTP clients
// and the dashboard unless told otherwise (flyd run --listen), which
// flyctl names in an editor's config when no flyd runs to ask.
const DefaultListen = "127.0.0.1:7717"

// Protocol is the number of the flyd HTTP/WebSocket protocol. It changes
// only when a change would break an older shim or flyctl.
const Protocol = 1

// Routes served by flyd. The {id} routes are net/http patterns: a client
// replaces "{id}" with a run id.
const (
	RouteMCP     = "/v1/mcp"
	RouteStatus  = "/v1/status"
	RouteRuns    = "/v1/runs"           // GET: {"runs": [...]}, newest first; ?root=/abs filters
	RouteRun     = "/v1/runs/{id}"      // GET: one run
	RouteRunStop = "/v1/runs/{id}/stop" // POST: stop a run and return its final state
	RouteRunLogs = "/v1/runs/{id}/logs" // GET: NDJSON log lines; ?after=SEQ&tail=N&follow=1
	// RouteRunReload (POST) hot-reloads a run; ?full=1 hot-restarts it.
	RouteRunReload = "/v1/runs/{id}/reload"
	// RouteRunErrors (GET) is a flutter run's errors as an ErrorsPage;
	// ?since=REV for what changed after a page's next_since, ?all=1 for
	// those before the last reload too, ?follow=1 for NDJSON pages as
	// errors come until the run ends.
	RouteRunErrors = "/v1/runs/{id}/errors"
	// RouteRunScreenshot (GET) is a PNG of what the run's app shows;
	// ?max_width=N&max_bytes=N scale it down.
	RouteRunScreenshot = "/v1/runs/{id}/screenshot"
	// RouteEvents (GET) is NDJSON: the Status document now and after
	// every change, for live views.
	RouteEvents = "/v1/events"
	// RouteUpstreams prefixes the upstream routes: POST {name}/restart
	// restarts every instance of that upstream ("*" for all).
	RouteUpstreams = "/v1/upstreams/"
	// RouteTokenRotate (POST, socket only) replaces the TCP listener's
	// token and returns {"token": ...}.
	RouteTokenRotate = "/v1/token/rotate"
	// RouteShutdown (POST, socket only) asks flyd to stop as SIGTERM
	// does: the runs their holders keep go on, for the next flyd; the
	// others (builds, commands, upstreams) stop. With ?runs=1
	// (QueryShutdownRuns) every run is stopped too. It answers 202 with
	// {"pid": N} before it stops.
	RouteShutdown     = "/v1/shutdown"
	QueryShutdownRuns = "runs"
	// RouteStreamable is MCP Streamable HTTP (?workspace=/abs/path).
	RouteStreamable = "/mcp"
	ContentNDJSON   = "application/x-ndjson"
)

// The "type" of each NDJSON line of RouteRunLogs.
const (
	LogLineEntry     = "entry"     // one log entry: seq, time, stream, text, truncated
	LogLineGap       = "gap"       // entries lost before they were read: seq, lost, resume, text
	LogLineHeartbeat = "heartbeat" // a follow is idle but alive: time, last_seq
	LogLineEnd       = "end"       // the last line without follow: state, exit_code, last_seq
	LogLineExit      = "exit"      // the last line of a follow: the run ended; state, exit_code, error, last_seq
)

// ShutdownRequest is what POST RouteShutdown asks for.
type ShutdownRequest struct {
	// Runs stops every run too, those that would outlive flyd's restart
	// (?runs=1; flyctl daemon stop --runs).
	Runs bool
}

// Subprotocol is the WebSocket subprotocol of RouteMCP: one JSON-RPC
// message per text frame.
const Subprotocol = "mcp"

// Header names.
const (
	// HeaderVersion carries "VERSION protocol=N" on every reply and
	// request; VERSION has the build's commit and date (see VersionHeader).
	HeaderVersion = "X-Fly-Version"
	// HeaderWorkspace is the URL-query-escaped absolute workspace root the
	// shim wants its session bound to.
	HeaderWorkspace = "X-Fly-Workspace"
	// HeaderEnv carries the client's whole environment, encoded as URL
	// query values (see EncodeEnv).
	HeaderEnv = "X-Fly-Env"
	// HeaderMaxMessage is the largest message in bytes flyd accepts on
	// RouteMCP; the shim refuses larger lines itself with a clear error.
	HeaderMaxMessage = "X-Fly-Max-Message-Bytes"
	// HeaderClient names a client of MCP 2026-07-28 over HTTP, whose
	// requests carry no session: requests with the same value (and
	// workspace and tool filter) share one fly session. The value is the
	// client's secret, a random one it chose. Without it, each request
	// is a session of its own; the client's name and version never join
	// requests.
	HeaderClient = "X-Fly-Client"
	// HeaderWidth and HeaderHeight give a screenshot's size in pixels as
	// sent; HeaderFullWidth and HeaderFullHeight the app's.
	HeaderWidth      = "X-Fly-Width"
	HeaderHeight     = "X-Fly-Height"
	HeaderFullWidth  = "X-Fly-Full-Width"
	HeaderFullHeight = "X-Fly-Full-Height"
)

// ToolchainEnv are the variables of a user's Flutter toolchain: where
// flutter, the Android SDK and Java are, the pub cache, the browser for
// web runs, and the proxies. flyctl bakes them into the service it
// installs and the configs of clients that start servers outside a shell
// (Claude Desktop); flyd fills them from its own environment into a run
// whose client passed fewer (after the user's login environment).
var ToolchainEnv = []string{
	"PATH", "FLUTTER_ROOT", "ANDROID_HOME", "ANDROID_SDK_ROOT", "JAVA_HOME", "PUB_CACHE", "CHROME_EXECUTABLE",
	"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
}

// MaxEnvVars bounds the variables DecodeEnv keeps.
const MaxEnvVars = 4096

// VersionHeader is the value of HeaderVersion for this build: its
// release, with its commit and date as semantic versioning's build
// metadata when known ("1.2.3+0123456789ab.20261127T100000Z protocol=1"),
// which every flyctl's ParseVersionHeader reads as it always did and
// version comparisons ignore.
func VersionHeader() string {
	return Version + buildMetadata(Version, Commit, Date) + " protocol=" + strconv.Itoa(Protocol)
}

// buildMetadata is "+COMMIT.DATE" for a release without metadata of its
// own: the commit's first 12 digits and its time in UTC, compact, each
// when known; "" when neither is.
func buildMetadata(version, commit, date string) string {
	if strings.Contains(version, "+") {
		return ""
	}
	var ids []string
	if c := identifier(commit); c != "" {
		ids = append(ids, c[:min(len(c), 12)])
	}
	if t, err := time.Parse(time.RFC3339, date); err == nil {
		ids = append(ids, t.UTC().Format("20060102T150405Z"))
	}
	if len(ids) == 0 {
		return ""
	}
	return "+" + strings.Join(ids, ".")
}

// identifier keeps what a build metadata identifier may hold.
func identifier(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
			return r
		}
		return -1
	}, s)
}

// EncodeEnv encodes an environment, as os.Environ gives it, for
// HeaderEnv: the session's runs get exactly this environment.
func EncodeEnv(environ []string) string {
	v := url.Values{}
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k != "" {
			v.Set(k, val)
		}
	}
	return v.Encode()
}

// DecodeEnv decodes a HeaderEnv value. Names must be non-empty and hold
// no '='; at most MaxEnvVars are kept.
func DecodeEnv(s string) map[string]string {
	v, _ := url.ParseQuery(s)
	env := make(map[string]string, len(v))
	for k, vals := range v {
		if k == "" || strings.ContainsAny(k, "=\x00") || len(env) >= MaxEnvVars {
			continue
		}
		env[k] = vals[0]
	}
	return env
}

// ParseVersionHeader splits a HeaderVersion value into the release and
// protocol number. ok is false when the value is missing or malformed.
func ParseVersionHeader(s string) (version string, protocol int, ok bool) {
	v, p, found := strings.Cut(s, " protocol=")
	if !found || v == "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, false
	}
	return v, n, true
}

// CheckPeer compares the HeaderVersion value a peer sent with this
// build's protocol. The error says which side to upgrade. self names this
// side ("flyd", "flyctl"), peer the other.
func CheckPeer(self, peer, header string) error {
	v, p, ok := ParseVersionHeader(header)
	switch {
	case !ok:
		return fmt.Errorf("%s sent no valid %s header (got %q); it is older than this %s %s: upgrade %s", peer, HeaderVersion, header, self, Version, peer)
	case p < Protocol:
		return fmt.Errorf("%s %s speaks protocol %d, this %s %s speaks %d: upgrade %s", peer, v, p, self, Version, Protocol, peer)
	case p > Protocol:
		return fmt.Errorf("%s %s speaks protocol %d, this %s %s speaks %d: upgrade %s", peer, v, p, self, Version, Protocol, self)
	}
	return nil
}

// A run's states (Run.State, and the state of a log's end and exit
// lines); the store keeps them under these names.
const (
	RunStarting    = "starting"
	RunRunning     = "running"
	RunStopped     = "stopped"     // stopped by a client or by flyd's shutdown
	RunExited      = "exited"      // the process exited by itself, with code 0
	RunFailed      = "failed"      // it could not start, exited non-zero or timed out (see Run.Crashed)
	RunCancelled   = "cancelled"   // the call that waited for it was cancelled, so it was killed
	RunInterrupted = "interrupted" // flyd died while it was live
)

// Run is a flutter run, build or one-shot command as flyd's HTTP API and
// MCP tools report it. Fields may be added, never change meaning.
type Run struct {
	RunID        string    `json:"run_id"`
	Kind         string    `json:"kind"`  // run, build or tool
	State        string    `json:"state"` // starting, running, stopped, exited, failed, cancelled or interrupted
	Argv         []string  `json:"argv"`
	Root         string    `json:"root"`
	PID          int       `json:"pid,omitempty"`
	ExitCode     *int      `json:"exit_code,omitempty"`
	StartedAt    time.Time `json:"started_at"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	AppID        string    `json:"app_id,omitempty"`
	VMServiceURI string    `json:"vm_service_uri,omitempty"`
	DTDURI       string    `json:"dtd_uri,omitempty"`
	Error        string    `json:"error,omitempty"`
	LogURI       string    `json:"log_uri"`
	StartedBy    *Actor    `json:"started_by,omitempty"`  // the client that started it
	LastAction   *Action   `json:"last_action,omitempty"` // the newest thing a client did to it
	Claim        *Claim    `json:"claim,omitempty"`       // a session's hold on it, while it lasts
	Errors       *Errors   `json:"errors,omitempty"`      // the app's framework errors (a flutter run's)
	// Crashed says that a failed run's app had started (flutter gave its
	// VM service or DTD) before it ended: it crashed, rather than failing
	// to build or start.
	Crashed bool `json:"crashed,omitempty"`
	// Holder says how flyd has a live run's process: "holder" (its holder
	// keeps it, and it outlives flyd), "reconnecting" (to its holder),
	// "degraded" (its holder is gone: the app runs on, reachable through
	// its VM service, and can be stopped) or "logs only" (its holder
	// speaks no version this flyd does); absent for a run that ends with
	// flyd. Degraded says why, for the last two.
	Holder   string `json:"holder,omitempty"`
	Degraded string `json:"degraded,omitempty"`
}

// AppError is one distinct framework error of a run, seen Count times.
type AppError struct {
	ID         uint64    `json:"id"`
	Count      int       `json:"count"`
	Summary    string    `json:"summary"`
	Library    string    `json:"library,omitempty"`
	Widget     string    `json:"widget,omitempty"`
	Location   string    `json:"location,omitempty"` // lib/x.dart:LINE:COL, where the error-causing widget was created
	Frame      string    `json:"frame,omitempty"`    // the first stack frame in the project
	Generation int       `json:"generation"`         // reloads and restarts before it
	FirstSeen  time.Time `json:"first_seen"`
	LastSeen   time.Time `json:"last_seen"`
	Line       string    `json:"line"` // the error in one line, as agents get it
}

// ErrorsPage is GET RouteRunErrors: the errors that changed after a
// revision, the most recently seen first.
type ErrorsPage struct {
	Type       string     `json:"type"` // "errors"; a follow ends with one "end" line
	RunID      string     `json:"run_id"`
	State      string     `json:"state"`
	Crashed    bool       `json:"crashed,omitempty"` // the end line's: as Run's
	Generation int        `json:"generation"`
	Errors     []AppError `json:"errors"`
	NextSince  uint64     `json:"next_since"`
	Total      int        `json:"total"`
	Dropped    int        `json:"dropped,omitempty"`
}

// ReloadResult is the answer to POST RouteRunReload: what the hot reload
// or restart did.
type ReloadResult struct {
	Code          int      `json:"code"` // flutter's: 0 when applied
	Message       string   `json:"message"`
	Applied       bool     `json:"applied"`
	Rejected      bool     `json:"rejected,omitempty"` // a hot restart is needed
	Summary       string   `json:"summary"`            // one line: "applied, no new errors"
	CompileOutput []string `json:"compile_output,omitempty"`
	NewErrors     []string `json:"new_errors"` // one line each, newest first
}

// App is a Flutter app that runs outside fly (an IDE's, a terminal's),
// found through its Dart Tooling Daemon's file.
type App struct {
	ID           string    `json:"app_id"` // stable while the app runs
	Name         string    `json:"name"`
	IDE          string    `json:"ide,omitempty"` // the IDE that runs it, when its DTD says
	Workspace    string    `json:"workspace"`     // the served workspace it belongs to
	Root         string    `json:"root"`          // its DTD's workspace root
	VMServiceURI string    `json:"vm_service_uri"`
	DTDPID       int       `json:"dtd_pid"`
	Since        time.Time `json:"since"` // when flyd found it
}

// Actor is a client that acted on a run: its session id and name.
type Actor struct {
	Session string `json:"session,omitempty"`
	Client  string `json:"client"`
}

// Action is one thing a client did to a run.
type Action struct {
	What    string    `json:"what"` // start, hot reload, hot restart, stop, claim, release
	By      Actor     `json:"by"`
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome,omitempty"`
	Forced  bool      `json:"forced,omitempty"` // it overrode another session's claim
}

// Claim is a session's hold on a run: until it ends, other sessions'
// reloads, restarts and stops are refused unless forced.
type Claim struct {
	By    Actor     `json:"by"`
	Note  string    `json:"note,omitempty"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// Errors counts a run's framework errors.
type Errors struct {
	Total    int    `json:"total"`             // errors the app reported, repeats included
	Distinct int    `json:"distinct"`          // distinct errors kept
	Current  int    `json:"current"`           // distinct errors since the last reload or restart
	URI      string `json:"uri,omitempty"`     // the resource that lists them
	Dropped  int    `json:"dropped,omitempty"` // distinct errors no longer kept
}

// Live reports whether the run has not ended yet.
func (r Run) Live() bool { return r.State == RunStarting || r.State == RunRunning }

// The NDJSON lines of a log stream (GET RouteRunLogs); Type is one of the
// LogLine* constants. Seq is the cursor: a client that remembers the seq
// of the last entry or gap line it got resumes with after=<seq>.
type (
	// EntryLine is one log entry.
	EntryLine struct {
		Type      string    `json:"type"`
		Seq       uint64    `json:"seq"`
		Time      time.Time `json:"time"`
		Stream    string    `json:"stream"` // stdout, stderr, event or fly
		Text      string    `json:"text"`
		Truncated bool      `json:"truncated,omitempty"`
	}
	// GapLine stands for entries lost before they were read.
	GapLine struct {
		Type   string    `json:"type"`
		Seq    uint64    `json:"seq"` // resume-1
		Time   time.Time `json:"time"`
		Lost   uint64    `json:"lost"`
		Resume uint64    `json:"resume"`
		Text   string    `json:"text"`
	}
	// HeartbeatLine says an idle follow is alive.
	HeartbeatLine struct {
		Type    string    `json:"type"`
		Time    time.Time `json:"time"`
		LastSeq uint64    `json:"last_seq"`
	}
	// StatusLine ends a stream: "end" without follow, "exit" when a
	// followed run has ended.
	StatusLine struct {
		Type     string `json:"type"`
		State    string `json:"state"`
		Crashed  bool   `json:"crashed,omitempty"` // as Run's
		ExitCode *int   `json:"exit_code"`
		Error    string `json:"error,omitempty"`
		LastSeq  uint64 `json:"last_seq"`
	}
)

// LogLine decodes any line of a log stream: Type says which fields are
// set.
type LogLine struct {
	Type      string    `json:"type"`
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Stream    string    `json:"stream"`
	Text      string    `json:"text"`
	Truncated bool      `json:"truncated"`
	Lost      uint64    `json:"lost"`
	Resume    uint64    `json:"resume"`
	LastSeq   uint64    `json:"last_seq"`
	State     string    `json:"state"`
	Crashed   bool      `json:"crashed"`
	ExitCode  *int      `json:"exit_code"`
	Error     string    `json:"error"`
}

// RunsReply is the body of GET RouteRuns: R is Run and A is App, or
// json.RawMessage for a client that keeps each as flyd sent it.
type RunsReply[R, A any] struct {
	Runs []R `json:"runs"`
	Apps []A `json:"apps"` // found outside fly
	// Projects names the project at each root of runs that has a
	// pubspec.yaml with a name: what the dashboard calls a run's app.
	Projects map[string]string `json:"projects"`
}

// Status is the reply of GET RouteStatus. Fields may be added, never
// change meaning.
type Status struct {
	Version   string    `json:"version"`
	Protocol  int       `json:"protocol"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	UptimeSec float64   `json:"uptime_seconds"`
	Socket    string    `json:"socket"`
	StateDir  string    `json:"state_dir"`
	HTTP      string    `json:"http,omitempty"` // the loopback listener's address; "" when off
	// HTTPWanted is the address flyd was configured to listen on, set
	// only when it was taken and flyd listens on HTTP instead: a config
	// must never name HTTP, whose port another process may hold later.
	HTTPWanted string            `json:"http_wanted,omitempty"`
	DBBytes    int64             `json:"db_bytes"`
	GrepCache  GrepCache         `json:"grep_cache"`
	Notices    []string          `json:"notices,omitempty"` // what people must know, such as a damaged db moved aside
	Sessions   []Session         `json:"sessions"`
	Workspaces []WorkspaceStatus `json:"workspaces"`
	Runs       []Run             `json:"runs"` // live ones
	Apps       []App             `json:"apps"` // found outside fly
	Upstreams  []Upstream        `json:"upstreams"`
}

// GrepCache is what flyd keeps in memory of files' contents for
// files_grep, every workspace's together, against its budget (flyd run
// --grep-cache-mb).
type GrepCache struct {
	Bytes int64 `json:"bytes"`
	Limit int64 `json:"limit_bytes"`
}

// Upstream is one running instance of a shared upstream MCP server.
type Upstream struct {
	Name      string `json:"name"`
	Share     string `json:"share"`               // workspace, global or session
	Workspace string `json:"workspace,omitempty"` // its root; "" when global
	PID       int    `json:"pid,omitempty"`
	State     string `json:"state"` // starting, running, restarting
	Sessions  int    `json:"sessions"`
	Restarts  int    `json:"restarts"`
	RSSBytes  int64  `json:"rss_bytes,omitempty"`
	Protocol  string `json:"protocol,omitempty"` // the MCP revision flyd speaks to it, while running
	LogURI    string `json:"log_uri,omitempty"`  // logs://upstream/{id}: its stderr
	Error     string `json:"error,omitempty"`    // why it is not running
}

// UpstreamLogURI names an upstream's stderr log, persisted under its
// process id, as flyd serves it: logs://upstream/{id}.
func UpstreamLogURI(id string) string { return "logs://upstream/" + id }

// Session describes an MCP session, connected or ended.
type Session struct {
	// ID is the session's handle: what names it to people and other
	// clients. It is never the session's own id (over HTTP, its
	// Mcp-Session-Id), and addresses nothing.
	ID            string    `json:"id"`
	ClientName    string    `json:"client_name,omitempty"`
	ClientVersion string    `json:"client_version,omitempty"`
	Workspace     string    `json:"workspace"`
	Via           string    `json:"via"`
	PeerPID       int       `json:"peer_pid,omitempty"`
	Since         time.Time `json:"since"`
	Ended         time.Time `json:"ended,omitzero"`
	FilesRead     int64     `json:"files_read"`
	ToolsCalled   int64     `json:"tools_called"`
	// Tools is the session's tool filter ("tools=app disable=sdk"), empty
	// when it sees every tool.
	Tools string `json:"tools,omitempty"`
}

// WorkspaceStatus describes one open workspace.
type WorkspaceStatus struct {
	Root        string `json:"root"`
	Files       int    `json:"files"`
	Sessions    int    `json:"sessions"`
	WatchedDirs int    `json:"watched_dirs"`
	WatchErrors int    `json:"watch_errors,omitempty"`
	BuildMS     int64  `json:"index_build_ms"`
	CacheBytes  int    `json:"grep_cache_bytes,omitempty"` // file contents kept for files_grep
}

// RouteGrep searches a workspace's files: GET with workspace, pattern,
// literal=1, glob, i=1, context, limit and cursor; the reply is a
// GrepResult.
const RouteGrep = "/v1/grep"

// GrepResult is one page of a search of a workspace's files.
type GrepResult struct {
	Root          string     `json:"root"`
	Files         []GrepFile `json:"files"`
	Matches       int        `json:"matches"`
	FilesSearched int        `json:"files_searched"`
	SkippedBinary int        `json:"skipped_binary,omitempty"`
	SkippedLarge  int        `json:"skipped_large,omitempty"`
	Truncated     bool       `json:"truncated"`
	NextCursor    string     `json:"next_cursor,omitempty"`
}

// GrepFile is a file's matches: its path relative to the root.
type GrepFile struct {
	Path    string      `json:"path"`
	Matches []GrepMatch `json:"matches"`
}

// GrepMatch is one matching line with its context.
type GrepMatch struct {
	Line   int      `json:"line"`
	Text   string   `json:"text"`
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}
