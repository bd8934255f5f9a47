package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/safetext"

	"github.com/fly-dev/fly/logring"
	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tools holds what the MCP tools need. Each tool is one method; addTools
// registers them all.
type tools struct{ s *Server }

// call resolves the session of a tool call.
func (t tools) call(req *mcp.CallToolRequest) (*client, error) {
	return t.s.sessionOf(req.Session)
}

// progress returns a reporter that sends progress notifications for req,
// or a no-op when the client asked for none.
func progress(ctx context.Context, req *mcp.CallToolRequest) func(string) {
	token := req.Params.GetProgressToken()
	if token == nil {
		return func(string) {}
	}
	var n atomic.Int64
	return func(msg string) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: float64(n.Add(1)), Message: msg,
		})
	}
}

// Run modes and defines shared by flutter_run and flutter_build.
type buildOptions struct {
	Mode        string   `json:"mode,omitempty" jsonschema:"debug, profile or release"`
	Target      string   `json:"target,omitempty"`
	Flavor      string   `json:"flavor,omitempty"`
	DartDefines []string `json:"dart_defines,omitempty" jsonschema:"as KEY=VALUE"`
}

// args turns the options into flutter flags, validating them; a path
// must resolve inside root.
func (o buildOptions) args(root *os.Root) ([]string, error) {
	var args []string
	switch o.Mode {
	case "":
	case "debug", "profile", "release":
		args = append(args, "--"+o.Mode)
	default:
		return nil, fmt.Errorf("mode %q is not debug, profile or release", o.Mode)
	}
	if o.Target != "" {
		if err := checkReadableFile(root, o.Target); err != nil {
			return nil, fmt.Errorf("target: %w", err)
		}
		args = append(args, "--target", o.Target)
	}
	if o.Flavor != "" {
		if strings.HasPrefix(o.Flavor, "-") {
			return nil, fmt.Errorf("flavor %q may not start with '-'", o.Flavor)
		}
		args = append(args, "--flavor", o.Flavor)
	}
	for _, d := range o.DartDefines {
		if k, _, ok := strings.Cut(d, "="); !ok || k == "" {
			return nil, fmt.Errorf("dart define %q is not KEY=VALUE", d)
		}
		args = append(args, "--dart-define="+d)
	}
	return args, nil
}

// runArgsAllowed are the extra `flutter run` flags a client may pass:
// none of them can make flutter run a program of the client's choosing.
// (--web-browser-flag is not one of them: some Chrome flags, such as
// --renderer-cmd-prefix, run arbitrary commands.) --dart-define-from-file
// names a file, which must be inside the workspace.
var runArgsAllowed = []string{
	"--web-port", "--web-hostname", "--web-renderer", "--no-pub", "--pub",
	"--track-widget-creation", "--no-track-widget-creation", "--verbose", "-v", "--start-paused",
	"--enable-software-rendering", "--trace-startup", "--endless-trace-buffer", "--purge-persistent-cache",
	"--device-vmservice-port", "--host-vmservice-port", "--dart-define-from-file", "--print-dtd",
	"--wasm", "--no-wasm", "--hot", "--no-hot",
}

func checkRunArgs(root *os.Root, args []string) error {
	for _, a := range args {
		name, val, hasVal := strings.Cut(a, "=")
		if !slices.Contains(runArgsAllowed, name) {
			return fmt.Errorf("argument %q is not allowed; allowed: %s (use the tool's own fields for device, target, mode, flavor and defines; write each flag as --name=value)",
				a, strings.Join(runArgsAllowed, " "))
		}
		if name == "--dart-define-from-file" {
			if !hasVal {
				return fmt.Errorf("write --dart-define-from-file=PATH, with a path inside the workspace")
			}
			if err := checkReadableFile(root, val); err != nil {
				return fmt.Errorf("--dart-define-from-file: %w", err)
			}
		}
	}
	return nil
}

type runParams struct {
	buildOptions
	Device string   `json:"device,omitempty" jsonschema:"see flutter_sdk devices"`
	Args   []string `json:"args,omitempty" jsonschema:"allowlisted flags: --web-port=8080"`
	Attach string   `json:"attach,omitempty" jsonschema:"an app id (runs_list) or VM-service URI"`
}

// RunResult is the structured result of flutter_run and flutter_attach.
type RunResult struct {
	RunID        string `json:"run_id"`
	AppID        string `json:"app_id,omitempty"`
	State        string `json:"state"`
	LogURI       string `json:"log_uri"`
	VMServiceURI string `json:"vm_service_uri,omitempty"`
	DTDURI       string `json:"dtd_uri,omitempty"`
	Message      string `json:"message,omitempty"`
}

func (t tools) flutterRun(ctx context.Context, req *mcp.CallToolRequest, p runParams) (*mcp.CallToolResult, RunResult, error) {
	if p.Attach != "" {
		if p.Device != "" || len(p.Args) > 0 || p.Mode != "" || p.Target != "" || p.Flavor != "" || len(p.DartDefines) > 0 {
			return nil, RunResult{}, errors.New("attach takes no other field: the app runs already, as it was started")
		}
		a := attachParams{AppID: p.Attach}
		if strings.Contains(p.Attach, "://") {
			a = attachParams{VMServiceURI: p.Attach}
		}
		return t.attach(ctx, req, a)
	}
	sess, err := t.call(req)
	if err != nil {
		return nil, RunResult{}, err
	}
	args, err := p.args(sess.ws.Index().Root())
	if err != nil {
		return nil, RunResult{}, err
	}
	if err := checkRunArgs(sess.ws.Index().Root(), p.Args); err != nil {
		return nil, RunResult{}, err
	}
	if p.Device != "" {
		args = append([]string{"-d", p.Device}, args...)
	}
	by := actor(sess)
	r, err := t.s.runs.Start(ctx, runs.Spec{Kind: store.KindRun, Root: sess.ws.Root(), Env: sess.Env(), Max: t.s.cfg.MaxRuns, By: &by,
		Args: append(append([]string{"run", "--machine"}, args...), p.Args...)})
	if le := (*runs.LimitError)(nil); errors.As(err, &le) {
		return nil, RunResult{}, fmt.Errorf("%d runs are already live in this workspace (%s): stop one with flutter_stop, or start flyd with a higher --max-runs",
			le.Max, strings.Join(le.Live, ", "))
	}
	if err != nil {
		return nil, RunResult{}, err
	}
	r.SetProgress(progress(ctx, req))
	defer r.SetProgress(nil)

	wait, cancel := context.WithTimeout(ctx, t.s.cfg.RunStartTimeout)
	defer cancel()
	select {
	case <-r.Started():
		// and flyd follows its VM service (debug mode), so that its
		// errors are seen from the start: briefly, it is not the app
		if r.Record().VMServiceURI != "" {
			follow, stop := context.WithTimeout(wait, 2*time.Second)
			select {
			case <-r.VMReady():
			case <-follow.Done():
			}
			stop()
		}
	case <-wait.Done():
	}
	rec := r.Record()
	res := RunResult{RunID: rec.ID, AppID: rec.AppID, State: string(rec.State), LogURI: runs.LogURI(rec.Kind, rec.ID),
		VMServiceURI: rec.VMServiceURI, DTDURI: rec.DTDURI}
	switch {
	case rec.State == store.StateRunning:
		res.Message = "the app is running; hot-reload it with flutter_hot_reload, read its log at " + res.LogURI
		on := ""
		if d := device(rec.Argv); d != "" {
			on = " on " + safetext.Field(d)
		}
		return textResult(fmt.Sprintf("run %s is running%s: flutter_hot_reload applies your edits; logs_read and flutter_errors read its log (%s) and errors",
			rec.ID, on, res.LogURI)), res, nil
	case hasEnded(r):
		// Its state can be final (flutter's app.stop) before its last
		// lines are read: the message waits for the run's end, briefly.
		select {
		case <-r.Done():
			rec = r.Record()
		case <-time.After(2 * time.Second):
		}
		when := "before the app started"
		if ended(rec) == "crashed" {
			when = "as the app started"
		}
		text, summary := failureText(r, "flutter run", when)
		res.Message = summary
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, res, nil
	}
	res.Message = "the app has not started yet; it keeps building in flyd: follow " + res.LogURI
	return textResult(fmt.Sprintf("run %s has not started yet: it keeps building in flyd; logs_read run_id=%s follows it", rec.ID, rec.ID)), res, nil
}

// buildPlatforms maps flutter_build's platform to the flutter subcommand.
var buildPlatforms = map[string]string{
	"apk": "apk", "android": "apk", "appbundle": "appbundle", "web": "web", "ios": "ios", "ipa": "ipa",
	"macos": "macos", "linux": "linux", "windows": "windows",
}

type buildParams struct {
	buildOptions
	Platform string `json:"platform" jsonschema:"apk, appbundle, web, ios, ipa, macos, linux or windows"`
}

// BuildResult is flutter_build's structured result.
type BuildResult struct {
	BuildID      string   `json:"build_id"`
	ExitCode     int      `json:"exit_code"`
	State        string   `json:"state"`
	ArtifactPath string   `json:"artifact_path,omitempty"`
	LogURI       string   `json:"log_uri"`
	LogTail      []string `json:"log_tail,omitempty"` // a failed build's last lines, as failureText filters them
}

func (t tools) build(ctx context.Context, req *mcp.CallToolRequest, p buildParams) (*mcp.CallToolResult, BuildResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, BuildResult{}, err
	}
	sub, ok := buildPlatforms[p.Platform]
	if !ok {
		return nil, BuildResult{}, fmt.Errorf("platform %q is not one of apk, appbundle, web, ios, ipa, macos, linux, windows", p.Platform)
	}
	args, err := p.args(sess.ws.Index().Root())
	if err != nil {
		return nil, BuildResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.s.cfg.BuildTimeout)
	defer cancel()
	by := actor(sess)
	r, err := t.s.runs.Start(ctx, runs.Spec{Kind: store.KindBuild, Root: sess.ws.Root(), Env: sess.Env(), Max: t.s.cfg.MaxBuilds, By: &by,
		Args: append([]string{"build", sub}, args...)})
	if le := (*runs.LimitError)(nil); errors.As(err, &le) {
		return nil, BuildResult{}, fmt.Errorf("%d builds are already running in this workspace (%s): wait for one, stop one with flutter_stop, or start flyd with a higher --max-builds",
			le.Max, strings.Join(le.Live, ", "))
	}
	if err != nil {
		return nil, BuildResult{}, err
	}
	r.SetProgress(progress(ctx, req))
	<-r.Done()
	rec := r.Record()
	res := BuildResult{BuildID: rec.ID, State: string(rec.State), LogURI: runs.LogURI(rec.Kind, rec.ID)}
	if rec.ExitCode != nil {
		res.ExitCode = *rec.ExitCode
	}
	if rec.State == store.StateExited {
		res.ArtifactPath = artifactPath(sess.ws.Root(), r.Ring())
		text := "flutter build " + sub + " succeeded"
		if res.ArtifactPath != "" {
			text = "built " + safetext.Line(res.ArtifactPath)
		}
		return textResult(text + "; its log: " + res.LogURI), res, nil
	}
	for _, l := range r.OutputTail(30) {
		res.LogTail = append(res.LogTail, safetext.Line(l))
	}
	text, _ := failureText(r, "flutter build "+sub, "")
	if ctx.Err() != nil {
		text = fmt.Sprintf("flutter build %s was cancelled or timed out after %s; its process group was killed\n%s", sub, t.s.cfg.BuildTimeout, text)
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, res, nil
}

// failureText is a failed run's or build's result as a person reads it:
// flutter's errors first (its compile errors with their file:line:col,
// each once, or else the last lines it printed), then what failed, in a
// line (summary), then where the whole log is. flutter's --machine events
// and flutter_tools' stack traces stay in the log.
func failureText(r *runs.Run, what, when string) (text, summary string) {
	rec := r.Record()
	p := r.Problems()
	var b strings.Builder
	for _, e := range p.Errors {
		b.WriteString(safetext.Lines(e) + "\n")
	}
	for _, l := range p.Lines {
		b.WriteString(safetext.Line(l) + "\n")
	}
	if p.More > 0 {
		fmt.Fprintf(&b, "… %d more (logs_read)\n", p.More)
	}
	shown := b.String()
	summary = what + " " + ended(rec)
	if when != "" {
		summary += " " + when
	}
	if rec.ExitCode != nil && *rec.ExitCode >= 0 {
		summary += fmt.Sprintf(" (exit %d)", *rec.ExitCode)
	}
	reason := rec.Error
	if strings.HasPrefix(reason, "exit code ") {
		reason = ""
	}
	if reason == "" {
		reason = r.LastError()
	}
	if reason = safetext.Line(reason); reason != "" && !strings.Contains(shown, reason) {
		summary += ": " + reason
	}
	b.WriteString(summary + "\n")
	if rec.Kind == store.KindRun {
		fmt.Fprintf(&b, "The whole log, with flutter's events and traces: logs_read run_id=%s events=true", rec.ID)
	} else {
		fmt.Fprintf(&b, "The whole log: logs_read run_id=%s", rec.ID)
	}
	return b.String(), summary
}

// builtRE finds flutter's "✓ Built <path>" line.
var builtRE = regexp.MustCompile(`(?:✓|√) Built (\S+)`)

// artifactPath is the absolute path of what the build reported it built.
func artifactPath(root string, ring *logring.Ring) string {
	entries := ring.Tail(ring.Len())
	for i := len(entries) - 1; i >= 0; i-- {
		if m := builtRE.FindStringSubmatch(entries[i].Text); m != nil {
			p := filepath.FromSlash(strings.ReplaceAll(m[1], `\`, "/"))
			if !filepath.IsAbs(p) {
				p = filepath.Join(root, p)
			}
			return p
		}
	}
	return ""
}

// oneShot runs a short flutter command as a "tool" run and waits for it.
func (t tools) oneShot(ctx context.Context, req *mcp.CallToolRequest, timeout time.Duration, args ...string) (*runs.Run, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	by := actor(sess)
	r, err := t.s.runs.Start(ctx, runs.Spec{Kind: store.KindTool, Root: sess.ws.Root(), Env: sess.Env(), By: &by, Args: args})
	if err != nil {
		return nil, err
	}
	<-r.Done()
	return r, nil
}

type noParams struct{}

// Device is one entry of `flutter devices --machine`.
type Device struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	TargetPlatform string          `json:"targetPlatform"`
	IsSupported    bool            `json:"isSupported"`
	Emulator       bool            `json:"emulator"`
	SDK            string          `json:"sdk,omitempty"`
	Capabilities   map[string]bool `json:"capabilities,omitempty"`
}

// DevicesResult is the structured result of flutter_sdk's devices.
type DevicesResult struct {
	Devices []Device `json:"devices"`
	LogURI  string   `json:"log_uri"`
}

func (t tools) devices(ctx context.Context, req *mcp.CallToolRequest, _ noParams) (*mcp.CallToolResult, DevicesResult, error) {
	r, err := t.oneShot(ctx, req, 2*time.Minute, "devices", "--machine")
	if err != nil {
		return nil, DevicesResult{}, err
	}
	res := DevicesResult{Devices: []Device{}, LogURI: runs.LogURI(store.KindTool, r.ID())}
	var out strings.Builder
	for _, e := range r.Ring().Tail(r.Ring().Len()) {
		if e.Stream == logring.Stdout {
			out.WriteString(e.Text + "\n")
		}
	}
	text := out.String()
	if i := strings.Index(text, "["); i >= 0 {
		if err := json.Unmarshal([]byte(text[i:]), &res.Devices); err == nil {
			return textResult(devicesText(res.Devices)), res, nil
		}
	}
	rec := r.Record()
	return nil, res, fmt.Errorf("flutter devices --machine (%s) printed no device list; see %s:\n%s", rec.State, res.LogURI, tailText(r.Ring(), 20))
}

// DoctorResult is the structured result of flutter_sdk's doctor.
type DoctorResult struct {
	ExitCode int    `json:"exit_code"`
	Report   string `json:"report"`
	LogURI   string `json:"log_uri"`
}

func (t tools) doctor(ctx context.Context, req *mcp.CallToolRequest, _ noParams) (*mcp.CallToolResult, DoctorResult, error) {
	r, err := t.oneShot(ctx, req, 3*time.Minute, "doctor")
	if err != nil {
		return nil, DoctorResult{}, err
	}
	rec := r.Record()
	res := DoctorResult{Report: outputText(r.Ring(), defaultTextBudget), LogURI: runs.LogURI(store.KindTool, r.ID())}
	if rec.ExitCode != nil {
		res.ExitCode = *rec.ExitCode
	}
	text := strings.TrimRight(res.Report, "\n") + fmt.Sprintf("\n(flutter doctor: exit %d; its log: %s)", res.ExitCode, res.LogURI)
	return textResult(text), res, nil
}

// devicesText is the devices, one line each: the id flutter_run takes,
// the name, the platform and what kind of device it is.
func devicesText(devs []Device) string {
	if len(devs) == 0 {
		return "no devices: flutter found none to run on (flutter_sdk doctor says what is missing)"
	}
	var b strings.Builder
	for _, d := range devs {
		f := []string{safetext.Field(d.ID), strconv.Quote(d.Name), safetext.Field(d.TargetPlatform)}
		if d.Emulator {
			f = append(f, "emulator")
		}
		if !d.IsSupported {
			f = append(f, "not supported by this project")
		}
		b.WriteString(strings.Join(f, "  ") + "\n")
	}
	b.WriteString("(pass an id as flutter_run's device)")
	return b.String()
}

type createParams struct {
	Directory   string `json:"directory,omitempty"`
	ProjectName string `json:"project_name,omitempty"`
	Org         string `json:"org,omitempty"`
	Confirm     bool   `json:"confirm,omitempty"`
}

// CreateResult is the structured result of flutter_sdk's create.
type CreateResult struct {
	ExitCode  int    `json:"exit_code"`
	Directory string `json:"directory"`
	LogURI    string `json:"log_uri"`
}

var identRE = regexp.MustCompile(`^[A-Za-z0-9_.]+$`)

func (t tools) create(ctx context.Context, req *mcp.CallToolRequest, p createParams) (*mcp.CallToolResult, CreateResult, error) {
	if !p.Confirm {
		return nil, CreateResult{}, errors.New("create writes files into the workspace: call it again with confirm: true")
	}
	sess, err := t.call(req)
	if err != nil {
		return nil, CreateResult{}, err
	}
	dir := path.Clean(p.Directory)
	if err := checkWritableDir(sess.ws.Index().Root(), dir); err != nil {
		return nil, CreateResult{}, fmt.Errorf("create: directory %q refused: %w", p.Directory, err)
	}
	args := []string{"create"}
	for flag, v := range map[string]string{"--project-name": p.ProjectName, "--org": p.Org} {
		if v == "" {
			continue
		}
		if !identRE.MatchString(v) {
			return nil, CreateResult{}, fmt.Errorf("%s %q may hold letters, digits, '_' and '.' only", flag, v)
		}
		args = append(args, flag, v)
	}
	args = append(args, dir)
	r, err := t.oneShot(ctx, req, 5*time.Minute, args...)
	if err != nil {
		return nil, CreateResult{}, err
	}
	rec := r.Record()
	res := CreateResult{Directory: filepath.Join(sess.ws.Root(), filepath.FromSlash(dir)), LogURI: runs.LogURI(store.KindTool, r.ID())}
	if rec.ExitCode != nil {
		res.ExitCode = *rec.ExitCode
	}
	if res.ExitCode != 0 {
		return nil, res, fmt.Errorf("flutter create failed (%s):\n%s", rec.State, tailText(r.Ring(), 20))
	}
	text := fmt.Sprintf("flutter create made a project in %s; its log: %s", safetext.Line(res.Directory), res.LogURI)
	return textResult(text), res, nil
}

type logsReadParams struct {
	RunID    string   `json:"run_id,omitempty" jsonschema:"or a logs:// URI"`
	Since    *uint64  `json:"since,omitempty"`
	Before   uint64   `json:"before,omitempty"`
	Tail     int      `json:"tail,omitempty" jsonschema:"last N entries"`
	Grep     string   `json:"grep,omitempty" jsonschema:"RE2"`
	Events   bool     `json:"events,omitempty"`
	Streams  []string `json:"streams,omitempty" jsonschema:"stdout, stderr, error, event, fly"`
	MaxBytes int      `json:"max_bytes,omitempty"`
}

// LogsReadResult is logs_read's structured result.
type LogsReadResult struct {
	RunID     string   `json:"run_id"`
	State     string   `json:"state"`
	FirstSeq  uint64   `json:"first_seq" jsonschema:"the oldest seq the log holds"`
	LastSeq   uint64   `json:"last_seq" jsonschema:"the newest seq the log holds"`
	FromSeq   uint64   `json:"from_seq,omitempty" jsonschema:"the oldest seq returned; pass as before to page back"`
	ToSeq     uint64   `json:"to_seq,omitempty" jsonschema:"the newest seq returned"`
	Entries   int      `json:"entries" jsonschema:"entries returned, one per line of the text"`
	NextSince uint64   `json:"next_since" jsonschema:"pass as since to read what comes after this page"`
	Truncated bool     `json:"truncated" jsonschema:"entries that match were left out: older ones (page back with before) or, with since, newer ones (continue with next_since)"`
	Others    []string `json:"others,omitempty" jsonschema:"what other sessions did to this run since your last call"`
}

// Budgets of what tools return: about 16 KB of text by default, so that
// one call does not flood an agent's context.
const (
	defaultTextBudget = 16 << 10
	maxTextBudget     = 256 << 10
)

// logsRead returns a page of a run's log as plain text, one entry per
// line ("seq time stream text"), within a byte budget: by default the
// newest entries; with since, the oldest after it. The structured result
// says where the page lies and how to page on.
func (t tools) logsRead(ctx context.Context, req *mcp.CallToolRequest, p logsReadParams) (*mcp.CallToolResult, LogsReadResult, error) {
	sel, err := logSelect(p.Streams, p.Events)
	if err != nil {
		return nil, LogsReadResult{}, err
	}
	id := p.RunID
	if strings.Contains(id, "://") {
		_, uid, _, err := parseLogURI(id)
		if err != nil {
			return nil, LogsReadResult{}, err
		}
		id = uid
	}
	budget := p.MaxBytes
	switch {
	case budget <= 0:
		budget = defaultTextBudget
	case budget > maxTextBudget:
		return nil, LogsReadResult{}, fmt.Errorf("max_bytes %d is over %d", budget, maxTextBudget)
	}
	if p.Grep != "" {
		re, err := regexp.Compile(p.Grep)
		if err != nil {
			return nil, LogsReadResult{}, fmt.Errorf("grep %q: %w", p.Grep, err)
		}
		sel.Grep = re
	}
	sess, err := t.call(req)
	if err != nil {
		return nil, LogsReadResult{}, err
	}
	r, err := t.runFor(sess, id, toRead)
	if err != nil {
		return nil, LogsReadResult{}, err
	}
	id = r.ID()
	var pg runs.TextPage
	if p.Since != nil {
		pg = r.ForwardPage(ctx, *p.Since, sel, budget, p.Tail)
	} else {
		pg = r.BackwardPage(ctx, p.Before, sel, budget, p.Tail)
	}
	res := LogsReadResult{RunID: id, State: string(r.Record().State), FirstSeq: pg.First, LastSeq: pg.Last,
		Entries: len(pg.Lines), NextSince: pg.Next, Truncated: pg.Truncated}
	res.Others = t.s.news(sess, r)
	if len(pg.Lines) > 0 {
		res.FromSeq, res.ToSeq = pg.From, pg.To
	}
	text := strings.Join(pg.Lines, "\n")
	if len(pg.Lines) == 0 {
		text = "(no entries)"
	}
	if pg.Truncated {
		if p.Since != nil {
			text += fmt.Sprintf("\n… more entries follow: call again with since=%d", pg.Next)
		} else {
			text = fmt.Sprintf("… older entries left out: call again with before=%d\n", pg.From) + text
		}
	}
	if hasEnded(r) {
		text = endLine(r, time.Now()) + "\n" + text
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: withNews(res.Others, text)}}}, res, nil
}

// tailText is the last n entries of ring as plain text, at most
// defaultTextBudget bytes of it.
func tailText(ring *logring.Ring, n int) string {
	return budgetText(ring.Tail(n), defaultTextBudget, "")
}

// outputText is what a one-shot command printed (flyd's own notes left
// out), its end kept within budget bytes.
func outputText(ring *logring.Ring, budget int) string {
	out := slices.DeleteFunc(ring.Tail(ring.Len()), func(e logring.Entry) bool { return e.Stream == logring.Fly })
	return budgetText(out, budget, "")
}

// budgetText joins the texts of entries, one per line (an entry's own
// newlines and controls escaped), keeping the newest that fit in budget
// bytes; a first line says how many were cut.
func budgetText(entries []logring.Entry, budget int, uri string) string {
	var lines []string // newest first
	used, i := 0, len(entries)
	for ; i > 0; i-- {
		l := safetext.Line(entries[i-1].Text)
		if used+len(l)+1 > budget {
			break
		}
		used += len(l) + 1
		lines = append(lines, l)
	}
	var b strings.Builder
	if i > 0 {
		fmt.Fprintf(&b, "… %d earlier lines left out", i)
		if uri != "" {
			fmt.Fprintf(&b, "; read them at %s", uri)
		}
		b.WriteByte('\n')
	}
	for j := len(lines) - 1; j >= 0; j-- {
		b.WriteString(lines[j])
		b.WriteByte('\n')
	}
	return b.String()
}
