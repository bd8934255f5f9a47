package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/fly-dev/fly/daemon/index"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type findParams struct {
	Glob   string `json:"glob" jsonschema:"** any dirs, {a,b}, [a-z]"`
	Limit  int    `json:"limit,omitempty" jsonschema:"default 200"`
	Cursor string `json:"cursor,omitempty"`
}

// FindResult is files_find's structured result.
type FindResult struct {
	URIs       []string `json:"uris"`
	Total      int      `json:"total" jsonschema:"how many files match in all"`
	NextCursor string   `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the next page; absent on the last"`
}

// filesFind lists the workspace's files that match a glob, from the warm
// index, in path order.
func (t tools) filesFind(ctx context.Context, req *mcp.CallToolRequest, p findParams) (*mcp.CallToolResult, FindResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, FindResult{}, err
	}
	g, err := index.CompileGlob(p.Glob)
	if err != nil {
		return nil, FindResult{}, fmt.Errorf("%v", err)
	}
	limit := p.Limit
	switch {
	case limit <= 0:
		limit = index.DefaultFindLimit
	case limit > index.MaxFindLimit:
		return nil, FindResult{}, fmt.Errorf("limit %d is over %d", limit, index.MaxFindLimit)
	}
	after, _, err := index.DecodeCursor(p.Cursor)
	if err != nil {
		return nil, FindResult{}, err
	}
	files, total, more := sess.ws.Index().Find(g, after, limit)
	res := FindResult{URIs: make([]string, 0, len(files)), Total: total}
	for _, f := range files {
		res.URIs = append(res.URIs, workspaceURI(f.Path))
	}
	if more {
		res.NextCursor = index.EncodeCursor(files[len(files)-1].Path, 0)
	}
	text := strings.Join(res.URIs, "\n")
	if res.NextCursor != "" {
		text += fmt.Sprintf("\n… %d of %d shown: call again with cursor %q", len(files), total, res.NextCursor)
	} else if total == 0 {
		text = "no file matches " + p.Glob
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, res, nil
}

type grepParams struct {
	Pattern         string `json:"pattern"`
	Literal         bool   `json:"literal,omitempty"`
	Glob            string `json:"glob,omitempty" jsonschema:"files to search"`
	CaseInsensitive bool   `json:"case_insensitive,omitempty"`
	Context         int    `json:"context,omitempty" jsonschema:"lines around, 0-5"`
	Limit           int    `json:"limit,omitempty" jsonschema:"default 100"`
	Cursor          string `json:"cursor,omitempty"`
}

// GrepFile is one file of files_grep's result, with its matches.
type GrepFile struct {
	URI     string            `json:"uri"`
	Matches []index.GrepMatch `json:"matches"`
}

// GrepResult is files_grep's structured result.
type GrepResult struct {
	Files         []GrepFile `json:"files"`
	Matches       int        `json:"matches"`
	FilesSearched int        `json:"files_searched"`
	SkippedBinary int        `json:"skipped_binary,omitempty"`
	SkippedLarge  int        `json:"skipped_large,omitempty"`
	Truncated     bool       `json:"truncated" jsonschema:"more matches follow: pass next_cursor to read them"`
	NextCursor    string     `json:"next_cursor,omitempty"`
}

// grep runs one page of a search of w.
func (s *Server) grep(ctx context.Context, w Workspace, p grepParams) (GrepResult, error) {
	q := index.GrepQuery{Pattern: p.Pattern, Literal: p.Literal, Glob: p.Glob, CaseInsensitive: p.CaseInsensitive,
		Context: p.Context, Limit: p.Limit, Cursor: p.Cursor}
	opt, err := q.Options(defaultTextBudget, s.cfg.MaxReadBytes)
	if err != nil {
		return GrepResult{}, err
	}
	pg, err := w.Index().Grep(ctx, w.Index().Root(), opt)
	if err != nil {
		return GrepResult{}, err
	}
	res := GrepResult{Files: []GrepFile{}, Matches: pg.Matches, FilesSearched: pg.Searched,
		SkippedBinary: pg.SkippedBinary, SkippedLarge: pg.SkippedLarge, Truncated: pg.Truncated, NextCursor: pg.NextCursor()}
	for _, f := range pg.Files {
		res.Files = append(res.Files, GrepFile{URI: workspaceURI(f.Path), Matches: f.Matches})
	}
	return res, nil
}

// filesGrep searches the contents of the workspace's files from the warm
// index, within a byte budget per page.
func (t tools) filesGrep(ctx context.Context, req *mcp.CallToolRequest, p grepParams) (*mcp.CallToolResult, GrepResult, error) {
	sess, err := t.call(req)
	if err != nil {
		return nil, GrepResult{}, err
	}
	res, err := t.s.grep(ctx, sess.ws, p)
	if err != nil {
		return nil, GrepResult{}, err
	}
	var b strings.Builder
	for _, f := range res.Files {
		b.WriteString(f.URI)
		b.WriteByte('\n')
		for _, m := range f.Matches {
			for i, l := range m.Before {
				fmt.Fprintf(&b, "%d-%s\n", m.Line-len(m.Before)+i, l)
			}
			fmt.Fprintf(&b, "%d:%s\n", m.Line, m.Text)
			for i, l := range m.After {
				fmt.Fprintf(&b, "%d-%s\n", m.Line+1+i, l)
			}
		}
	}
	fmt.Fprintf(&b, "%d matches in %d files; %d files searched", res.Matches, len(res.Files), res.FilesSearched)
	if n := res.SkippedBinary + res.SkippedLarge; n > 0 {
		fmt.Fprintf(&b, " (%d binary and %d large files skipped)", res.SkippedBinary, res.SkippedLarge)
	}
	if res.Truncated {
		fmt.Fprintf(&b, "\n… more matches follow: call again with cursor %q", res.NextCursor)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, res, nil
}

// maxCompletions bounds one completion/complete answer.
const maxCompletions = 100

// complete answers completion/complete: paths of the workspace for the
// workspace:///{+path} template, from the warm index.
func (s *Server) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	p := req.Params
	if p != nil && p.Ref != nil && p.Ref.Type == "ref/prompt" {
		return s.completePromptArg(req)
	}
	if p != nil && p.Ref != nil && p.Ref.Type == "ref/resource" && p.Ref.URI == moduleTemplate && p.Argument.Name == "name" {
		sess, err := s.sessionOf(req.Session)
		if err != nil {
			return nil, err
		}
		g, err := sess.ws.Modules()
		if err != nil {
			return nil, err
		}
		res.Completion.Values = completeModule(g, p.Argument.Value)
		if len(res.Completion.Values) > maxCompletions {
			res.Completion.Values, res.Completion.HasMore = res.Completion.Values[:maxCompletions], true
		}
		return res, nil
	}
	if p == nil || p.Ref == nil || p.Ref.Type != "ref/resource" || p.Ref.URI != "workspace:///{+path}" || p.Argument.Name != "path" {
		return res, nil
	}
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return nil, err
	}
	prefix := p.Argument.Value
	for _, f := range sess.ws.Index().After(prefix, sess.ws.Index().Len()) {
		if !strings.HasPrefix(f.Path, prefix) {
			break
		}
		if len(res.Completion.Values) == maxCompletions {
			res.Completion.HasMore = true
			break
		}
		res.Completion.Values = append(res.Completion.Values, f.Path)
	}
	if f, ok := sess.ws.Index().Lookup(prefix); ok && prefix != "" {
		res.Completion.Values = append([]string{f.Path}, res.Completion.Values...)
		if len(res.Completion.Values) > maxCompletions {
			res.Completion.Values = res.Completion.Values[:maxCompletions]
			res.Completion.HasMore = true
		}
	}
	res.Completion.Total = len(res.Completion.Values)
	return res, nil
}

// completePromptArg completes the arguments of flyd's prompts: the
// choices they name, the workspace's paths, and its runs.
func (s *Server) completePromptArg(req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	p := req.Params
	value := p.Argument.Value
	var choices []string
	switch p.Argument.Name {
	case "state_management":
		choices = []string{"setState", "provider", "riverpod", "bloc"}
	case "http_package":
		choices = []string{"http", "dio"}
	case "layers": // a comma-separated list: complete its last element
		done, last := "", value
		if i := strings.LastIndexByte(value, ','); i >= 0 {
			done, last = value[:i+1], strings.TrimSpace(value[i+1:])
		}
		for _, l := range []string{"data", "domain", "presentation", "application"} {
			if strings.HasPrefix(l, last) && !strings.Contains(","+done, ","+l+",") {
				choices = append(choices, done+l)
			}
		}
		value = ""
	case "path", "run_id":
		sess, err := s.sessionOf(req.Session)
		if err != nil {
			return nil, err
		}
		if p.Argument.Name == "path" {
			for _, f := range sess.ws.Index().After(value, sess.ws.Index().Len()) {
				if !strings.HasPrefix(f.Path, value) || len(choices) > maxCompletions {
					break
				}
				choices = append(choices, f.Path)
			}
		} else if recs, err := s.runs.List(sess.ws.Root()); err == nil {
			for _, r := range recs {
				choices = append(choices, r.ID)
			}
		}
	}
	for _, c := range choices {
		if strings.HasPrefix(strings.ToLower(c), strings.ToLower(value)) {
			if len(res.Completion.Values) == maxCompletions {
				res.Completion.HasMore = true
				break
			}
			res.Completion.Values = append(res.Completion.Values, c)
		}
	}
	res.Completion.Total = len(res.Completion.Values)
	return res, nil
}
