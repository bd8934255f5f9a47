package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools that do several related things, chosen by a field: each
// hands on to the handler its part had as a tool of its own (whose old
// name still answers, unlisted).

type inspectParams struct {
	RunID    string `json:"run_id,omitempty"`
	What     string `json:"what,omitempty" jsonschema:"widgets (default) or screenshot"`
	MaxBytes int    `json:"max_bytes,omitempty"`
	MaxDepth int    `json:"max_depth,omitempty"`
	MaxWidth int    `json:"max_width,omitempty"`
}

// inspect is flutter_inspect: the widget tree, or a screenshot.
func (t tools) inspect(ctx context.Context, req *mcp.CallToolRequest, p inspectParams) (*mcp.CallToolResult, any, error) {
	switch p.What {
	case "", "widgets", "tree", "widget_tree":
		if p.MaxWidth != 0 {
			return nil, nil, errors.New("max_width is for what: screenshot")
		}
		return result(t.widgetTree(ctx, req, widgetTreeParams{RunID: p.RunID, MaxBytes: p.MaxBytes, MaxDepth: p.MaxDepth}))
	case "screenshot", "screen":
		if p.MaxDepth != 0 {
			return nil, nil, errors.New("max_depth is for what: widgets")
		}
		return result(t.screenshot(ctx, req, screenshotParams{RunID: p.RunID, MaxWidth: p.MaxWidth, MaxBytes: p.MaxBytes}))
	}
	return nil, nil, fmt.Errorf("what %q is not widgets or screenshot", p.What)
}

type sdkParams struct {
	Command string `json:"command" jsonschema:"devices, doctor or create"`
	createParams
}

// sdk is flutter_sdk: flutter devices, doctor or create.
func (t tools) sdk(ctx context.Context, req *mcp.CallToolRequest, p sdkParams) (*mcp.CallToolResult, any, error) {
	c := p.createParams
	if p.Command != "create" && (c.Directory != "" || c.ProjectName != "" || c.Org != "" || c.Confirm) {
		return nil, nil, fmt.Errorf("directory, project_name, org and confirm are for command: create, not %q", p.Command)
	}
	switch p.Command {
	case "devices":
		return result(t.devices(ctx, req, noParams{}))
	case "doctor":
		return result(t.doctor(ctx, req, noParams{}))
	case "create":
		if c.Directory == "" {
			return nil, nil, errors.New("create needs directory: where the project goes, relative to the workspace root ('.' for the root)")
		}
		return result(t.create(ctx, req, c))
	}
	return nil, nil, fmt.Errorf("command %q is not devices, doctor or create", p.Command)
}

// result passes on what a typed handler returned, its output as any, and
// none with an error (the SDK would encode a zero output beside it).
func result[Out any](res *mcp.CallToolResult, out Out, err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, err
	}
	return res, out, nil
}

type readParams struct {
	Path  string `json:"path"`
	Line  int    `json:"line,omitempty" jsonschema:"first line"`
	Lines int    `json:"lines,omitempty"`
}

type readResult struct {
	URI       string `json:"uri"`
	FromLine  int    `json:"from_line"`
	ToLine    int    `json:"to_line"`
	Total     int    `json:"total_lines"`
	NextLine  int    `json:"next_line,omitempty"`
	Truncated bool   `json:"truncated"`
}

// maxReadLine bounds the line a files_read may start at.
const maxReadLine = 10_000_000

// filesRead is files_read: a workspace file's lines, numbered, within
// the text budget, for clients that do not read resources.
func (t tools) filesRead(ctx context.Context, req *mcp.CallToolRequest, p readParams) (*mcp.CallToolResult, readResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, readResult{}, err
	}
	if p.Line < 0 || p.Line > maxReadLine || p.Lines < 0 {
		return nil, readResult{}, fmt.Errorf("line is 1 to %d and lines positive", maxReadLine)
	}
	rel, err := checkRelPath("/" + strings.TrimPrefix(p.Path, "/"))
	if err != nil {
		return nil, readResult{}, err
	}
	uri := workspaceURI(rel)
	if why := t.s.cfg.Rules.Refusal(rel); why != "" {
		return nil, readResult{}, notFound(uri, why)
	}
	c, err := readFile(sess.ws.Index().Root(), uri, rel, byteRange{}, t.s.cfg.MaxReadBytes)
	if err != nil {
		return nil, readResult{}, err
	}
	sess.FileRead()
	lines := strings.SplitAfter(c.text, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	first := max(p.Line, 1)
	res := readResult{URI: uri, FromLine: first, Total: len(lines)}
	if first > len(lines) && len(lines) > 0 {
		return nil, readResult{}, fmt.Errorf("line %d is past the end of %s (%d lines)", first, rel, len(lines))
	}
	var b strings.Builder
	i := first - 1
	for ; i < len(lines); i++ {
		if p.Lines > 0 && i-(first-1) == p.Lines {
			break
		}
		l := fmt.Sprintf("%d\t%s", i+1, lines[i])
		if !strings.HasSuffix(l, "\n") {
			l += "\n"
		}
		if b.Len()+len(l) > defaultTextBudget && i > first-1 {
			break
		}
		b.WriteString(l)
	}
	res.ToLine = i
	if i < len(lines) {
		res.Truncated, res.NextLine = true, i+1
		fmt.Fprintf(&b, "… %d more lines: call again with line=%d\n", len(lines)-i, i+1)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, res, nil
}
