package mcpserver

import (
	"bufio"
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

// maxLineRead is the most of one line files_read shows.
const maxLineRead = 4 << 10

// filesRead is files_read: a workspace file's lines, numbered, within
// the text budget, for clients that do not read resources. The file is
// read as a stream, so a file of any size can be paged through.
func (t tools) filesRead(ctx context.Context, req *mcp.CallToolRequest, p readParams) (*mcp.CallToolResult, readResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, readResult{}, err
	}
	if p.Line < 0 || p.Line > maxReadLine || p.Lines < 0 {
		return nil, readResult{}, fmt.Errorf("line is 1 to %d and lines positive", maxReadLine)
	}
	// A refusal is the agent's to read: a tool error, not a protocol one.
	rel, err := checkRelPath("/" + strings.TrimPrefix(p.Path, "/"))
	if err != nil {
		return nil, readResult{}, errors.New(err.Error())
	}
	uri := workspaceURI(rel)
	if why := t.s.cfg.Rules.Refusal(rel); why != "" {
		return nil, readResult{}, errors.New(notFound(uri, why).Error())
	}
	f, _, err := openServed(sess.ws.Index(), t.s.cfg.Rules, uri, rel)
	if err != nil {
		return nil, readResult{}, errors.New(err.Error())
	}
	defer f.Close()
	sess.FileRead()
	first := max(p.Line, 1)
	res := readResult{URI: uri, FromLine: first}
	var b strings.Builder
	r := bufio.NewReaderSize(f, 64<<10)
	n, scanned := 0, 0 // lines and bytes read
	for ctx.Err() == nil && scanned < maxReadScan {
		line, size, cut, err := readLine(r)
		if err != nil && size == 0 {
			break
		}
		n++
		scanned += size
		switch {
		case n < first:
			continue
		case res.Truncated:
			continue // counting the rest
		case (p.Lines > 0 && n-first == p.Lines) || (b.Len()+len(line) > defaultTextBudget && n > first):
			res.Truncated, res.NextLine = true, n
			continue
		}
		if cut {
			line += "… (line cut)"
		}
		fmt.Fprintf(&b, "%d\t%s\n", n, strings.ToValidUTF8(line, "\uFFFD"))
		res.ToLine = n
	}
	if first > n && n > 0 {
		return nil, readResult{}, fmt.Errorf("line %d is past the end of %s (%d lines)", first, rel, n)
	}
	more := "lines"
	if scanned < maxReadScan {
		res.Total = n
	} else {
		more = "lines at least"
		if !res.Truncated && res.ToLine > 0 {
			res.Truncated, res.NextLine = true, res.ToLine+1
		}
	}
	if res.Truncated {
		fmt.Fprintf(&b, "… %d more %s: call again with line=%d\n", n-res.NextLine+1, more, res.NextLine)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, res, nil
}

// maxReadScan bounds the bytes of a file one files_read goes through
// (to its page, then counting the lines after it).
const maxReadScan = 64 << 20

// readLine reads one line, returning at most maxLineRead bytes of it
// (cut when there were more), without its end, and how many bytes it
// took in the file; err is set at the end of the file.
func readLine(r *bufio.Reader) (line string, size int, cut bool, err error) {
	var sb strings.Builder
	for {
		chunk, isPrefix, e := r.ReadLine()
		size += len(chunk)
		if sb.Len() < maxLineRead {
			sb.Write(chunk[:min(len(chunk), maxLineRead-sb.Len())])
		}
		if e != nil || !isPrefix {
			if e == nil {
				size++ // the line end
			}
			return strings.TrimSuffix(sb.String(), "\r"), size, size-1 > maxLineRead, e
		}
	}
}
