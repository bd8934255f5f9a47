package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
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

// grepBatch is how many files the workers read before the results are put
// in order: a page usually ends within the first batches, and cancelling
// stops the rest.
const grepBatch = 64

var grepBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Grep searches the files of the index, through root, in path order, with
// GOMAXPROCS workers, and returns one page: matches grouped by file, until
// the limit or the byte budget is reached. A file is read only if it is a
// regular file with one link (as reads are served), under MaxFile bytes,
// and not binary. A literal part of the pattern, which Go's regexp finds
// with a fast string search, rejects most files without a line split.
// Cancelling ctx stops the workers; Grep then returns ctx's error.
func (x *Index) Grep(ctx context.Context, root *os.Root, opt GrepOptions) (GrepPage, error) {
	var files []string
	for _, f := range x.Files() {
		if f.Path < opt.After || (opt.Glob != nil && !opt.Glob.Match(f.Path)) {
			continue
		}
		files = append(files, f.Path)
	}
	var pg GrepPage
	used := 0
	workers := runtime.GOMAXPROCS(0)
	// Batches start small, for the small pages of a paged search, and grow.
	size := workers
	for start := 0; start < len(files); start += size {
		if start > 0 {
			size = min(2*size, grepBatch)
		}
		batch := files[start:min(start+size, len(files))]
		results := make([]fileResult, len(batch))
		var wg sync.WaitGroup
		next := make(chan int)
		for range min(workers, len(batch)) {
			wg.Go(func() {
				var d dirCache
				defer d.close()
				for i := range next {
					results[i] = x.grepFile(ctx, &d, root, batch[i], opt)
				}
			})
		}
		for i := range batch {
			if ctx.Err() != nil {
				break
			}
			next <- i
		}
		close(next)
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return GrepPage{}, err
		}
		for i, r := range results {
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
			gf := GrepFile{Path: batch[i]}
			for _, m := range r.matches {
				if batch[i] == opt.After && m.Line <= opt.AfterLine {
					continue
				}
				size := len(batch[i]) + len(m.Text) + 16
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
	return pg, nil
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

// dirCache keeps the directory of the last file a worker read open as a
// root of its own: files come in path order, so mostly from the same
// directory, and opening a name in it is one system call, where opening
// a whole path through the workspace's root walks every element.
type dirCache struct {
	dir  string
	root *os.Root // nil when dir could not be opened
}

// open returns the root of rel's directory, through root.
func (d *dirCache) open(root *os.Root, rel string) *os.Root {
	dir := path.Dir(rel)
	if dir == d.dir && d.dir != "" {
		return d.root
	}
	d.close()
	d.dir = dir
	d.root, _ = root.OpenRoot(filepath.FromSlash(dir))
	return d.root
}

func (d *dirCache) close() {
	if d.root != nil {
		d.root.Close()
	}
	d.dir, d.root = "", nil
}

// grepFile searches the file rel: from the content cache, else from disk
// through the worker's directory cache d.
func (x *Index) grepFile(ctx context.Context, d *dirCache, root *os.Root, rel string, opt GrepOptions) fileResult {
	if ctx.Err() != nil {
		return fileResult{skip: skipOther}
	}
	data, ok, epoch := x.cache.get(rel)
	if ok {
		if int64(len(data)) > opt.MaxFile {
			return fileResult{skip: skipLarge}
		}
		return searchData(data, opt)
	}
	dir := d.open(root, rel)
	if dir == nil {
		return fileResult{skip: skipOther}
	}
	f, err := dir.OpenFile(path.Base(rel), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return fileResult{skip: skipOther}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || LinkCount(fi) > 1 {
		return fileResult{skip: skipOther}
	}
	if fi.Size() > opt.MaxFile {
		return fileResult{skip: skipLarge}
	}
	buf := grepBufs.Get().(*bytes.Buffer)
	defer grepBufs.Put(buf)
	buf.Reset()
	buf.Grow(int(fi.Size()) + 1)
	if _, err := io.Copy(buf, io.LimitReader(f, opt.MaxFile+1)); err != nil && !errors.Is(err, io.EOF) {
		return fileResult{skip: skipOther}
	}
	data = buf.Bytes()
	if int64(len(data)) > opt.MaxFile {
		return fileResult{skip: skipLarge}
	}
	if bytes.IndexByte(data[:min(len(data), binaryProbe)], 0) < 0 {
		x.cache.put(rel, data, epoch)
	}
	return searchData(data, opt)
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
