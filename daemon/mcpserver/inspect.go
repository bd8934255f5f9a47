package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fly-dev/fly/daemon/inspect"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/daemon/vmservice"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A look inside a running app, within an agent's budget: the widget tree
// the project built, and what the screen shows.

// extensionWait bounds how long a look waits for the app to register the
// inspector (an app that has just started or hot-restarted).
const extensionWait = 5 * time.Second

// inspectorGroups names each call's object group, which is disposed after.
var inspectorGroups atomic.Uint64

// decoding is held while a screenshot is decoded and scaled: one at a
// time in flyd, whatever the number of runs and calls, so that what the
// pictures take (up to 64 MB decoded each, see inspect.Scale) is paid
// once. The answers themselves are read one at a time per run
// (runs.Run.LookVM).
var decoding = make(chan struct{}, 1)

// lookable returns the run to look inside, or why there is none.
func (t tools) lookable(req *mcp.CallToolRequest, id string) (*runs.Run, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, err
	}
	r, err := t.runFor(sess, id, toAct)
	if err != nil {
		return nil, err
	}
	rec := r.Record()
	switch {
	case hasEnded(r):
		return nil, fmt.Errorf("%s; %s", endLine(r, time.Now()), nextStep(rec))
	case r.Mode() == "release":
		return nil, fmt.Errorf("run %s is a release build: it has no VM service, so no widget tree or screenshot; run it in debug mode", r.ID())
	case rec.VMServiceURI == "":
		return nil, fmt.Errorf("run %s has no VM service yet: wait until the app has started (see %s)", r.ID(), runs.LogURI(rec.Kind, r.ID()))
	}
	return r, nil
}

// callError says what a failed call into the app means for the agent.
func callError(r *runs.Run, what string, err error) error {
	var ve *vmservice.Error
	switch {
	case errors.Is(err, runs.ErrNoExtension) && r.Mode() == "profile":
		return fmt.Errorf("run %s is a profile build: the widget inspector exists only in debug builds", r.ID())
	case errors.Is(err, runs.ErrNoExtension):
		return fmt.Errorf("the app of run %s has not registered the widget inspector within %s: is it a Flutter app in debug mode?", r.ID(), extensionWait)
	case errors.Is(err, runs.ErrNoVMService):
		return fmt.Errorf("flyd is not connected to the VM service of run %s right now; try again in a moment", r.ID())
	case errors.As(err, &ve):
		return fmt.Errorf("the app could not give its %s: %s (code %d)", what, ve.Message, ve.Code)
	}
	return fmt.Errorf("%s of run %s: %w", what, r.ID(), err)
}

type widgetTreeParams struct {
	RunID    string `json:"run_id,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty" jsonschema:"budget of the text, default 8192, at most 262144"`
	MaxDepth int    `json:"max_depth,omitempty" jsonschema:"levels shown, default 40"`
}

// WidgetTreeResult is the structured result of flutter_inspect's widget
// tree.
type WidgetTreeResult struct {
	RunID     string `json:"run_id"`
	Widgets   int    `json:"widgets" jsonschema:"widgets the project created in the tree"`
	Shown     int    `json:"shown"`
	Truncated bool   `json:"truncated" jsonschema:"widgets were left out: raise max_bytes or max_depth"`
}

// widgetTree returns the widgets the project created, indented, with
// where each was created.
func (t tools) widgetTree(ctx context.Context, req *mcp.CallToolRequest, p widgetTreeParams) (*mcp.CallToolResult, WidgetTreeResult, error) {
	if p.MaxBytes < 0 || p.MaxBytes > maxTextBudget || p.MaxDepth < 0 || p.MaxDepth > 1000 {
		return nil, WidgetTreeResult{}, fmt.Errorf("max_bytes is 1 to %d, max_depth 1 to 1000", maxTextBudget)
	}
	r, err := t.lookable(req, p.RunID)
	if err != nil {
		return nil, WidgetTreeResult{}, err
	}
	if r.Mode() == "profile" { // no inspector will come: say so now
		return nil, WidgetTreeResult{}, callError(r, "widget tree", runs.ErrNoExtension)
	}
	group := "fly-" + strconv.FormatUint(inspectorGroups.Add(1), 10)
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = r.LookVM(ctx, "ext.flutter.inspector.getRootWidgetTree",
		map[string]any{"groupName": group, "isSummaryTree": "true", "withPreviews": "false", "fullDetails": "false"}, extensionWait, &res)
	_ = r.CallVM(ctx, "ext.flutter.inspector.disposeGroup", map[string]any{"objectGroup": group}, 0, nil)
	if err != nil {
		return nil, WidgetTreeResult{}, callError(r, "widget tree", err)
	}
	if len(res.Result) == 0 || string(res.Result) == "null" {
		return nil, WidgetTreeResult{}, fmt.Errorf("the app of run %s has no widget tree yet (no frame drawn)", r.ID())
	}
	tree, err := inspect.Summarize(res.Result, r.Root(), inspect.TreeOptions{MaxBytes: p.MaxBytes, MaxDepth: p.MaxDepth})
	if err != nil {
		return nil, WidgetTreeResult{}, err
	}
	out := WidgetTreeResult{RunID: r.ID(), Widgets: tree.Widgets, Shown: tree.Shown, Truncated: tree.Truncated}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tree.Text}}}, out, nil
}

type screenshotParams struct {
	RunID    string `json:"run_id,omitempty"`
	MaxWidth int    `json:"max_width,omitempty" jsonschema:"pixels, default 540"`
	MaxBytes int    `json:"max_bytes,omitempty" jsonschema:"of the PNG, default 262144, at most 4194304"`
}

// ScreenshotResult is the structured result of flutter_inspect's
// screenshot.
type ScreenshotResult struct {
	RunID      string `json:"run_id"`
	Width      int    `json:"width"`
	Height     int    `json:"height"`
	FullWidth  int    `json:"full_width" jsonschema:"as the app drew it"`
	FullHeight int    `json:"full_height"`
	Bytes      int    `json:"bytes"`
}

// screenshot returns what the app's screen shows, scaled down.
func (t tools) screenshot(ctx context.Context, req *mcp.CallToolRequest, p screenshotParams) (*mcp.CallToolResult, ScreenshotResult, error) {
	if p.MaxWidth < 0 || p.MaxWidth > 8192 || p.MaxBytes < 0 || p.MaxBytes > 4<<20 {
		return nil, ScreenshotResult{}, errors.New("max_width is 16 to 8192, max_bytes at most 4194304")
	}
	r, err := t.lookable(req, p.RunID)
	if err != nil {
		return nil, ScreenshotResult{}, err
	}
	var res struct {
		Screenshot string `json:"screenshot"`
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.LookVM(ctx, "_flutter.screenshot", nil, 0, &res); err != nil {
		return nil, ScreenshotResult{}, callError(r, "screenshot", err)
	}
	select {
	case decoding <- struct{}{}:
	case <-ctx.Done():
		return nil, ScreenshotResult{}, fmt.Errorf("screenshot of run %s: waiting for another screenshot to be decoded: %w", r.ID(), ctx.Err())
	}
	raw, err := base64.StdEncoding.DecodeString(res.Screenshot)
	res.Screenshot = ""
	var shot inspect.Shot
	if err == nil && len(raw) > 0 {
		shot, err = inspect.Scale(raw, inspect.ShotOptions{MaxWidth: p.MaxWidth, MaxBytes: p.MaxBytes})
	} else {
		err = fmt.Errorf("the app of run %s sent no screenshot", r.ID())
	}
	<-decoding
	if err != nil {
		return nil, ScreenshotResult{}, err
	}
	out := ScreenshotResult{RunID: r.ID(), Width: shot.Width, Height: shot.Height, FullWidth: shot.FullWidth, FullHeight: shot.FullHeight, Bytes: len(shot.PNG)}
	text := fmt.Sprintf("screenshot of run %s: %d×%d (the app drew %d×%d), %d bytes", r.ID(), shot.Width, shot.Height, shot.FullWidth, shot.FullHeight, len(shot.PNG))
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.ImageContent{Data: shot.PNG, MIMEType: "image/png"},
		&mcp.TextContent{Text: text},
	}}, out, nil
}
