package index

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// Search defaults and bounds, the same for every client: files_find and
// files_grep, and flyctl grep over the HTTP API.
const (
	DefaultFindLimit = 200
	MaxFindLimit     = 5000
	DefaultGrepLimit = 100
	MaxGrepLimit     = 1000
	MaxGrepContext   = 5
	grepLineLen      = 300 // longer lines are cut around the match
)

// GrepQuery is a search of file contents as a client writes it.
type GrepQuery struct {
	Pattern         string
	Literal         bool
	Glob            string
	CaseInsensitive bool
	Context         int
	Limit           int    // 0 for DefaultGrepLimit
	Cursor          string // the NextCursor of the previous page
}

// Options checks q and turns it into GrepOptions with a page of budget
// bytes of text, skipping files over maxFile bytes.
func (q GrepQuery) Options(budget int, maxFile int64) (GrepOptions, error) {
	re, err := CompilePattern(q.Pattern, q.Literal, q.CaseInsensitive)
	if err != nil {
		return GrepOptions{}, err
	}
	opt := GrepOptions{Pattern: re, Context: q.Context, Limit: q.Limit, Budget: budget, MaxFile: maxFile, MaxLineLen: grepLineLen}
	if q.Glob != "" {
		if opt.Glob, err = CompileGlob(q.Glob); err != nil {
			return GrepOptions{}, err
		}
	}
	switch {
	case q.Context < 0 || q.Context > MaxGrepContext:
		return GrepOptions{}, fmt.Errorf("context %d is not 0 to %d", q.Context, MaxGrepContext)
	case opt.Limit <= 0:
		opt.Limit = DefaultGrepLimit
	case opt.Limit > MaxGrepLimit:
		return GrepOptions{}, fmt.Errorf("limit %d is over %d", opt.Limit, MaxGrepLimit)
	}
	if opt.After, opt.AfterLine, err = DecodeCursor(q.Cursor); err != nil {
		return GrepOptions{}, err
	}
	return opt, nil
}

// NextCursor is the cursor that continues after page, "" on the last.
func (p GrepPage) NextCursor() string {
	if !p.Truncated {
		return ""
	}
	return EncodeCursor(p.NextPath, p.NextLine)
}

// searchCursor is the opaque position of a search page.
type searchCursor struct {
	Path string `json:"p"`
	Line int    `json:"l,omitempty"`
}

// EncodeCursor makes the opaque cursor of a search page that continues
// after path (and, for grep, after line of it).
func EncodeCursor(path string, line int) string {
	b, _ := json.Marshal(searchCursor{Path: path, Line: line})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a cursor EncodeCursor made; "" is the start.
func DecodeCursor(s string) (path string, line int, err error) {
	var c searchCursor
	if s == "" {
		return "", 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return "", 0, fmt.Errorf("invalid cursor %q: pass back the next_cursor of the previous page", s)
	}
	return c.Path, c.Line, nil
}
