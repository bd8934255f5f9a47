package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Find returns the files of the index that match g, in path order: up to
// limit of those that sort after after (""), how many match in all, and
// whether more than limit match after after. It is one pass over the
// index.
func (x *Index) Find(g *Glob, after string, limit int) (files []File, total int, more bool) {
	for _, f := range x.Files() {
		if !g.Match(f.Path) {
			continue
		}
		total++
		if f.Path > after {
			if len(files) < limit {
				files = append(files, f)
			} else {
				more = true
			}
		}
	}
	return files, total, more
}

// GrepOptions is what Grep looks for and how much it returns.
type GrepOptions struct {
	Pattern    *regexp.Regexp // what to look for, line by line
	Glob       *Glob          // only files that match; nil for all
	Context    int            // lines of context before and after a match (0-5)
	Limit      int            // matches per page
	Budget     int            // bytes of text per page (lines and context)
	MaxFile    int64          // files larger than this are skipped
	MaxLineLen int            // longer lines are cut around the match
	// After resumes a search: the page starts after the match at line
	// AfterLine of file After ("" starts at the beginning).
	After     string
	AfterLine int
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Line   int      `json:"line"` // 1-based
	Text   string   `json:"text"` // without its line ending; cut lines are marked with "…"
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// GrepFile is a file's matches on a page.
type GrepFile struct {
	Path    string      `json:"path"`
	Matches []GrepMatch `json:"matches"`
}

// GrepPage is one page of a search.
type GrepPage struct {
	Files          []GrepFile
	Matches        int  // on this page
	Searched       int  // files read to make this page
	SkippedBinary  int  // files with a NUL in their first 8 KB
	SkippedLarge   int  // files over GrepOptions.MaxFile
	Truncated      bool // more matches follow: resume after the last one
	NextPath       string
	NextLine       int
	BudgetExceeded bool // the page ended on the byte budget, not the limit
}

// binaryProbe is how much of a file is looked at for a NUL byte.
const binaryProbe = 8 << 10

// Grep searches the files of the index, through root, in path order, and
// returns one page: matches grouped by file, until the limit or the byte
// budget is reached. Workers (GOMAXPROCS of them) read and search files
// ahead of the page, at most grepWindow files ahead, while the caller's
// goroutine puts the page together in order. A file is read only if it is
// a regular file with one link (as reads are served), under MaxFile
// bytes, and not binary. A literal part of the pattern, which Go's regexp
// finds with a fast string search, rejects most files without a line
// split. Cancelling ctx stops the workers; Grep then returns ctx's error.
func (x *Index) Grep(ctx context.Context, root *os.Root, opt GrepOptions) (GrepPage, error) {
	var files []string
	for _, f := range x.Files() {
		if f.Path < opt.After || (opt.Glob != nil && !opt.Glob.Match(f.Path)) {
			continue
		}
		files = append(files, f.Path)
	}
	x.searches.enter() // the warmer waits meanwhile
	x.searchOnce.Do(func() { close(x.searched) })
	defer x.searches.leave()
	ctx, stop := context.WithCancel(ctx)
	chunks := x.searchAhead(ctx, root, files, opt)
	defer func() {
		stop()
		for range chunks { // the workers end once they see ctx done
		}
	}()
	var pg GrepPage
	used := 0
	i := 0
	for chunk := range chunks {
		for _, r := range chunk {
			i++
			pg.Searched++
			switch r.skip {
			case skipBinary:
				pg.SkippedBinary++
				continue
			case skipLarge:
				pg.SkippedLarge++
				continue
			case skipOther:
				continue
			}
			name := files[i-1]
			gf := GrepFile{Path: name}
			for _, m := range r.matches {
				if name == opt.After && m.Line <= opt.AfterLine {
					continue
				}
				size := len(name) + len(m.Text) + 16
				for _, l := range m.Before {
					size += len(l) + 1
				}
				for _, l := range m.After {
					size += len(l) + 1
				}
				if pg.Matches == opt.Limit || (used+size > opt.Budget && pg.Matches > 0) {
					pg.Truncated = true
					pg.BudgetExceeded = pg.Matches < opt.Limit
					if len(gf.Matches) > 0 {
						pg.Files = append(pg.Files, gf)
					}
					last := pg.Files[len(pg.Files)-1]
					pg.NextPath, pg.NextLine = last.Path, last.Matches[len(last.Matches)-1].Line
					return pg, nil
				}
				used += size
				pg.Matches++
				gf.Matches = append(gf.Matches, m)
			}
			if len(gf.Matches) > 0 {
				pg.Files = append(pg.Files, gf)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return GrepPage{}, err
	}
	return pg, nil
}

// Grep's read-ahead: chunks of files, the first small (a paged search
// often ends within a few files), the rest grepChunk long; at most
// grepWindow chunks ahead of the page being put together.
const (
	grepChunk  = 64
	grepWindow = 8
)

// chunkBounds splits n files into chunks: 1, 2, 4 … files, then
// grepChunk each.
func chunkBounds(n int) []int {
	bounds := []int{0}
	for size := 1; bounds[len(bounds)-1] < n; size = min(2*size, grepChunk) {
		bounds = append(bounds, min(n, bounds[len(bounds)-1]+size))
	}
	return bounds
}

// searchAhead searches files with a pool of workers, each taking a chunk
// of files at a time, and sends the results chunk by chunk in the files'
// order, at most grepWindow chunks ahead of the receiver. The channel
// closes when every chunk was sent or ctx is done; the receiver must then
// drain it, which waits for the workers.
func (x *Index) searchAhead(ctx context.Context, root *os.Root, files []string, opt GrepOptions) <-chan []fileResult {
	out := make(chan []fileResult)
	bounds := chunkBounds(len(files))
	chunks := len(bounds) - 1
	// Slot c%grepWindow holds chunk c's results; a token of room lets a
	// worker claim one more chunk, and the sender gives one back per
	// chunk sent, so a slot is free again whenever a worker claims.
	slots := make([]chan []fileResult, grepWindow)
	for i := range slots {
		slots[i] = make(chan []fileResult, 1)
	}
	room := make(chan struct{}, grepWindow)
	for range grepWindow {
		room <- struct{}{}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), chunks) {
		wg.Go(func() { // owned by searchAhead's sender, which waits for it
			var d dirCache
			defer d.close()
			for {
				select {
				case <-ctx.Done():
					return
				case <-room:
				}
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				slots[c%grepWindow] <- x.grepChunk(ctx, &d, root, files[bounds[c]:bounds[c+1]], opt)
			}
		})
	}
	go func() { // owned by the receiver, which drains out
		defer close(out)
		defer wg.Wait()
		for c := range chunks {
			var res []fileResult
			select {
			case res = <-slots[c%grepWindow]:
			case <-ctx.Done():
				return
			}
			select {
			case out <- res:
			case <-ctx.Done():
				return
			}
			room <- struct{}{}
		}
	}()
	return out
}

type skipReason int

const (
	skipNone skipReason = iota
	skipBinary
	skipLarge
	skipOther // gone, not regular, hard-linked, unreadable
)

type fileResult struct {
	matches []GrepMatch
	skip    skipReason
}

// grepChunk searches a chunk of files: each from the content cache,
// else from disk through the worker's directory cache d, keeping what it
// read. The cache is asked and filled once for the whole chunk.
func (x *Index) grepChunk(ctx context.Context, d *dirCache, root *os.Root, files []string, opt GrepOptions) []fileResult {
	res := make([]fileResult, len(files))
	data, epoch := x.cache.getAll(files)
	var read []int // files read from disk, to keep
	for i, rel := range files {
		if ctx.Err() != nil {
			res[i] = fileResult{skip: skipOther}
			continue
		}
		if data[i] == nil {
			var skip skipReason
			if data[i], skip = d.read(root, rel, opt.MaxFile); skip != skipNone {
				res[i] = fileResult{skip: skip}
				continue
			}
			read = append(read, i)
		}
		if int64(len(data[i])) > opt.MaxFile {
			res[i] = fileResult{skip: skipLarge}
			continue
		}
		res[i] = searchData(data[i], opt)
	}
	if len(read) > 0 {
		x.cache.keepAll(files, data, read, epoch, x.Len())
	}
	return res
}

// searchData searches one file's contents.
func searchData(data []byte, opt GrepOptions) fileResult {
	if bytes.IndexByte(data[:min(len(data), binaryProbe)], 0) >= 0 {
		return fileResult{skip: skipBinary}
	}
	// One pass over the whole file rejects most files; a file with CR
	// line ends is split first, so that $ sees the lines as they are.
	if bytes.IndexByte(data, '\r') < 0 && !opt.Pattern.Match(data) {
		return fileResult{}
	}
	return fileResult{matches: matchLines(data, opt)}
}

// matchLines returns the matching lines of data, with their context.
func matchLines(data []byte, opt GrepOptions) []GrepMatch {
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, data)
			break
		}
		lines = append(lines, data[:i])
		data = data[i+1:]
	}
	var out []GrepMatch
	for n, l := range lines {
		l = bytes.TrimSuffix(l, []byte("\r"))
		loc := opt.Pattern.FindIndex(l)
		if loc == nil {
			continue
		}
		m := GrepMatch{Line: n + 1, Text: cutLine(l, loc, opt.MaxLineLen)}
		for i := max(0, n-opt.Context); i < n; i++ {
			m.Before = append(m.Before, cutLine(bytes.TrimSuffix(lines[i], []byte("\r")), nil, opt.MaxLineLen))
		}
		for i := n + 1; i < min(len(lines), n+1+opt.Context); i++ {
			m.After = append(m.After, cutLine(bytes.TrimSuffix(lines[i], []byte("\r")), nil, opt.MaxLineLen))
		}
		out = append(out, m)
	}
	return out
}

// cutLine returns l as valid UTF-8, cut to about max bytes around the
// match at loc (or from its start), with "…" where it was cut.
func cutLine(l []byte, loc []int, max int) string {
	if max <= 0 || len(l) <= max {
		return strings.ToValidUTF8(string(l), "\uFFFD")
	}
	start := 0
	if loc != nil {
		mid := (loc[0] + loc[1]) / 2
		start = mid - max/2
	}
	start = clamp(start, 0, len(l)-max)
	end := start + max
	for start > 0 && !utf8.RuneStart(l[start]) {
		start--
	}
	for end < len(l) && !utf8.RuneStart(l[end]) {
		end++
	}
	var b strings.Builder
	if start > 0 {
		b.WriteString("…")
	}
	b.WriteString(strings.ToValidUTF8(string(l[start:end]), "\uFFFD"))
	if end < len(l) {
		b.WriteString("…")
	}
	return b.String()
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// CompilePattern compiles a grep pattern: RE2, or a fixed string when
// literal, case-insensitive when asked.
func CompilePattern(pattern string, literal, caseInsensitive bool) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, errors.New("empty pattern")
	}
	if len(pattern) > maxGlobLen {
		return nil, fmt.Errorf("pattern is %d bytes, over %d", len(pattern), maxGlobLen)
	}
	expr := pattern
	if literal {
		expr = regexp.QuoteMeta(pattern)
	}
	if caseInsensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile("(?m)" + expr)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	return re, nil
}
