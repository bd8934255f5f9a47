package index

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGlob(t *testing.T) {
	paths := []string{
		"main.dart", "pubspec.yaml", "lib/main.dart", "lib/src/a.dart", "lib/src/b.g.dart", "lib/src/deep/c.dart",
		"test/a_test.dart", "android/app/build.gradle", "README.md", "lib/x.DART", "lib/{odd}.dart", "lib/[x].dart",
		"web/index.html", "lib/model_user.dart", "lib/view_user.dart", "lib/ctrl_user.dart",
	}
	for _, tc := range []struct {
		glob string
		want []string
	}{
		{"**/*.dart", []string{"main.dart", "lib/main.dart", "lib/src/a.dart", "lib/src/b.g.dart", "lib/src/deep/c.dart", "test/a_test.dart", "lib/{odd}.dart", "lib/[x].dart", "lib/model_user.dart", "lib/view_user.dart", "lib/ctrl_user.dart"}},
		{"*.dart", []string{"main.dart", "lib/main.dart", "lib/src/a.dart", "lib/src/b.g.dart", "lib/src/deep/c.dart", "test/a_test.dart", "lib/{odd}.dart", "lib/[x].dart", "lib/model_user.dart", "lib/view_user.dart", "lib/ctrl_user.dart"}},
		{"lib/*.dart", []string{"lib/main.dart", "lib/{odd}.dart", "lib/[x].dart", "lib/model_user.dart", "lib/view_user.dart", "lib/ctrl_user.dart"}},
		{"lib/**", []string{"lib/main.dart", "lib/src/a.dart", "lib/src/b.g.dart", "lib/src/deep/c.dart", "lib/x.DART", "lib/{odd}.dart", "lib/[x].dart", "lib/model_user.dart", "lib/view_user.dart", "lib/ctrl_user.dart"}},
		{"lib/**/*.dart", []string{"lib/main.dart", "lib/src/a.dart", "lib/src/b.g.dart", "lib/src/deep/c.dart", "lib/{odd}.dart", "lib/[x].dart", "lib/model_user.dart", "lib/view_user.dart", "lib/ctrl_user.dart"}},
		{"lib/src/?.dart", []string{"lib/src/a.dart"}},
		{"lib/{model,view}_*.dart", []string{"lib/model_user.dart", "lib/view_user.dart"}},
		{"lib/{model,{view,ctrl}}_user.dart", []string{"lib/model_user.dart", "lib/view_user.dart", "lib/ctrl_user.dart"}},
		{"lib/[mv]*_user.dart", []string{"lib/model_user.dart", "lib/view_user.dart"}},
		{"lib/[!mv]*_user.dart", []string{"lib/ctrl_user.dart"}},
		{"lib/\\{odd\\}.dart", []string{"lib/{odd}.dart"}},
		{"lib/\\[x\\].dart", []string{"lib/[x].dart"}},
		{"**/*.{yaml,gradle}", []string{"pubspec.yaml", "android/app/build.gradle"}},
		{"*.g.dart", []string{"lib/src/b.g.dart"}},
		{"./lib/main.dart", []string{"lib/main.dart"}},
		{"README.md", []string{"README.md"}},
		{"nothing/*", nil},
	} {
		g, err := CompileGlob(tc.glob)
		if err != nil {
			t.Errorf("CompileGlob(%q) = %v", tc.glob, err)
			continue
		}
		var got []string
		for _, p := range paths {
			if g.Match(p) {
				got = append(got, p)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("glob %q matches %q, want %q", tc.glob, got, tc.want)
		}
	}
	for _, bad := range []string{"", "/etc/*", "lib/{a,b", "lib/[ab", "x\\", strings.Repeat("{", 40) + "a" + strings.Repeat("}", 40), strings.Repeat("a", 2000)} {
		if _, err := CompileGlob(bad); !errors.Is(err, ErrGlob) {
			t.Errorf("CompileGlob(%.30q) = %v, want ErrGlob", bad, err)
		}
	}
}

// FuzzCompileGlob: any pattern compiles or is refused with ErrGlob, never
// panics, and a compiled one matches paths in time linear in their length
// (RE2).
func FuzzCompileGlob(f *testing.F) {
	for _, s := range []string{"**/*.dart", "lib/{a,b}/[!x]?.dart", "\\*", "[]]", "{,}", "**", "a/**/b", "[a-", "{{{}}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		g, err := CompileGlob(pattern)
		if err != nil {
			if !errors.Is(err, ErrGlob) {
				t.Fatalf("CompileGlob(%q) = %v, not ErrGlob", pattern, err)
			}
			return
		}
		for _, p := range []string{"lib/main.dart", "a", "", strings.Repeat("a/", 200) + "b.dart", pattern} {
			g.Match(p)
		}
	})
}

// searchTree writes files under a new index and returns it, built.
func searchTree(t *testing.T, files map[string]string) *Index {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	x, err := openIndex(root, DefaultRules(), nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		x.Run(ctx)
	})
	return x
}

func grepAll(t *testing.T, x *Index, opt GrepOptions) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		pg, err := x.Grep(context.Background(), x.Root(), opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range pg.Files {
			for _, m := range f.Matches {
				out = append(out, fmt.Sprintf("%s:%d:%s", f.Path, m.Line, m.Text))
			}
		}
		if !pg.Truncated {
			return out
		}
		if pages > 10000 {
			t.Fatal("paging does not end")
		}
		opt.After, opt.AfterLine = pg.NextPath, pg.NextLine
	}
}

func TestGrepEdgeCases(t *testing.T) {
	long := strings.Repeat("x", 5000) + "NEEDLE" + strings.Repeat("y", 5000)
	x := searchTree(t, map[string]string{
		"lib/a.dart":     "void main() {}\nfinal x = 1;\n// TODO: fix\n",
		"lib/crlf.dart":  "alpha\r\nbeta end\r\ngamma\r\n",
		"lib/utf8.dart":  "// café ünïcode 日本語 end\n",
		"lib/long.dart":  long + "\n",
		"lib/bin.dart":   "abc\x00def TODO\n",
		"lib/nolf.dart":  "last line TODO",
		"build/x.dart":   "TODO in build\n",
		".env":           "TODO secret\n",
		"lib/empty.dart": "",
	})
	opt := func(p string, lit, ci bool) GrepOptions {
		re, err := CompilePattern(p, lit, ci)
		if err != nil {
			t.Fatal(err)
		}
		return GrepOptions{Pattern: re, Limit: 100, Budget: 16 << 10, MaxFile: 1 << 20, MaxLineLen: 300}
	}
	for _, tc := range []struct {
		pattern string
		lit, ci bool
		want    []string
	}{
		{"TODO", false, false, []string{"lib/a.dart:3:// TODO: fix", "lib/nolf.dart:1:last line TODO"}},
		{"^final", false, false, []string{"lib/a.dart:2:final x = 1;"}},
		{"end$", false, false, []string{"lib/crlf.dart:2:beta end", "lib/utf8.dart:1:// café ünïcode 日本語 end"}},
		{"日本", false, false, []string{"lib/utf8.dart:1:// café ünïcode 日本語 end"}},
		{"CAFÉ", false, true, []string{"lib/utf8.dart:1:// café ünïcode 日本語 end"}},
		{"x = 1;", true, false, []string{"lib/a.dart:2:final x = 1;"}},
		{"x.=", false, false, []string{"lib/a.dart:2:final x = 1;"}},
		{"x.=", true, false, nil},
	} {
		got := grepAll(t, x, opt(tc.pattern, tc.lit, tc.ci))
		if !slices.Equal(got, tc.want) {
			t.Errorf("grep %q (literal %v, ci %v) = %q, want %q", tc.pattern, tc.lit, tc.ci, got, tc.want)
		}
	}
	got := grepAll(t, x, opt("NEEDLE", false, false))
	if len(got) != 1 || !strings.Contains(got[0], "NEEDLE") || !strings.HasPrefix(strings.TrimPrefix(got[0], "lib/long.dart:1:"), "…") || !strings.HasSuffix(got[0], "…") || len(got[0]) > 400 {
		t.Errorf("a match in a 10 KB line = %.100q (%d bytes), want it cut around the match and marked", got, len(got[0]))
	}
	pg, _ := x.Grep(context.Background(), x.Root(), opt("TODO", false, false))
	if pg.SkippedBinary != 1 {
		t.Errorf("skipped binary = %d, want 1", pg.SkippedBinary)
	}
	small := opt("TODO", false, false)
	small.MaxFile = 10
	if pg, _ := x.Grep(context.Background(), x.Root(), small); pg.SkippedLarge == 0 {
		t.Errorf("a 10-byte cap skipped no file as large: %+v", pg)
	}
}

// TestGrepPagingExactlyOnce pages through 3,000 matches in 300 files with
// small pages and budgets: every match comes exactly once, in order.
func TestGrepPagingExactlyOnce(t *testing.T) {
	files := map[string]string{}
	var want []string
	for i := range 300 {
		p := fmt.Sprintf("lib/f%03d.dart", i)
		var b strings.Builder
		for j := range 10 {
			fmt.Fprintf(&b, "match %d %d\nother\n", i, j)
			want = append(want, fmt.Sprintf("%s:%d:match %d %d", p, 2*j+1, i, j))
		}
		files[p] = b.String()
	}
	x := searchTree(t, files)
	re, _ := CompilePattern("match", false, false)
	for _, tc := range []struct{ limit, budget int }{{7, 1 << 20}, {1000, 300}, {1, 1}} {
		got := grepAll(t, x, GrepOptions{Pattern: re, Limit: tc.limit, Budget: tc.budget, MaxFile: 1 << 20})
		if !slices.Equal(got, want) {
			t.Errorf("limit %d budget %d: %d matches, want %d in order", tc.limit, tc.budget, len(got), len(want))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := x.Grep(ctx, x.Root(), GrepOptions{Pattern: re, Limit: 10, Budget: 1 << 20, MaxFile: 1 << 20}); !errors.Is(err, context.Canceled) {
		t.Errorf("Grep with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestFind(t *testing.T) {
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("lib/f%02d.dart", i)] = ""
		files[fmt.Sprintf("lib/f%02d.yaml", i)] = ""
	}
	x := searchTree(t, files)
	g, _ := CompileGlob("**/*.dart")
	var got []string
	after := ""
	for {
		page, total, _ := x.Find(g, after, 7)
		if total != 50 {
			t.Fatalf("total = %d, want 50", total)
		}
		if len(page) == 0 {
			break
		}
		for _, f := range page {
			got = append(got, f.Path)
		}
		after = page[len(page)-1].Path
	}
	if len(got) != 50 || !slices.IsSorted(got) {
		t.Errorf("paged %d files (sorted %v), want 50 in order", len(got), slices.IsSorted(got))
	}
}

// TestWarmer: once the index has been searched, the warmer reads every
// served file into the cache, those the search left out too; a search
// then answers from memory.
func TestWarmer(t *testing.T) {
	files := map[string]string{"lib/bin.dart": "a\x00b NEEDLE\n"}
	for i := range 300 {
		files[fmt.Sprintf("lib/d%d/f%d.dart", i%7, i)] = fmt.Sprintf("class F%d {} // NEEDLE %d\n", i, i)
	}
	x := searchTree(t, files)
	// Until a search, the warmer reads nothing, however long it is given
	// (a warmer that read ahead at once had the 300 files in a few ms).
	idle, err := openIndex(x.root, DefaultRules(), nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	idle.warm(wait) // returns when wait ends
	stop()
	if st := idle.Stats(); st.CacheFiles != 0 || st.Warm {
		t.Fatalf("a warmer given 300 ms before any search: %+v, want nothing read", st)
	}
	idle.Root().Close()

	x, err = openIndex(x.root, DefaultRules(), nil, nil, false) // its own Run, below
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // owned by the test: stopped below
		defer close(done)
		x.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	one, _ := CompilePattern("NEEDLE 7", true, false)
	glob, _ := CompileGlob("lib/d0/f7.dart")
	if pg, err := x.Grep(context.Background(), x.Root(), GrepOptions{Pattern: one, Glob: glob, Limit: 10, Budget: 1 << 20, MaxFile: 1 << 20, MaxLineLen: 300}); err != nil || pg.Matches != 1 {
		t.Fatalf("the first search, of one file: %+v, %v", pg, err)
	}
	select {
	case <-x.warmDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the warmer did not finish within 30s")
	}
	if st := x.Stats(); !st.Warm || st.CacheFiles != x.Len() {
		t.Fatalf("after warming: %+v, want all %d files cached", st, x.Len())
	}
	// Unreadable on disk now: only the cache can answer.
	for p := range files {
		if err := os.Chmod(filepath.Join(x.root, filepath.FromSlash(p)), 0); err != nil {
			t.Fatal(err)
		}
	}
	re, _ := CompilePattern("NEEDLE", true, false)
	pg, err := x.Grep(context.Background(), x.Root(), GrepOptions{Pattern: re, Limit: 1000, Budget: 1 << 20, MaxFile: 1 << 20, MaxLineLen: 300})
	if err != nil || pg.Matches != 300 || pg.SkippedBinary != 1 {
		t.Errorf("a search after warming: %d matches, %d binary, %v; want 300 from the cache and the binary file skipped", pg.Matches, pg.SkippedBinary, err)
	}
}

// TestSharedCacheBudget: the indexes of one flyd keep file contents
// within the budget they share; an index that ends gives its part back;
// a budget of nothing keeps nothing, and its warmer reads nothing.
func TestSharedCacheBudget(t *testing.T) {
	tree := func(tag string) *Index {
		files := map[string]string{}
		for i := range 100 {
			files[fmt.Sprintf("lib/f%d.dart", i)] = fmt.Sprintf("class %s%d {} // %s\n", tag, i, strings.Repeat("x", 900))
		}
		x := searchTree(t, files)
		y, err := openIndex(x.root, DefaultRules(), nil, nil, false) // its own Run, below
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	run := func(x *Index) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { // owned by the test: stopped by stop
			defer close(done)
			x.Run(ctx)
		}()
		// The warmer starts with the first search: one of no file.
		re, _ := CompilePattern("class", true, false)
		none, _ := CompileGlob("none/**")
		if _, err := x.Grep(context.Background(), x.Root(), GrepOptions{Pattern: re, Glob: none, Limit: 10, Budget: 1 << 20, MaxFile: 1 << 20, MaxLineLen: 300}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-x.warmDone:
		case <-time.After(30 * time.Second):
			t.Fatal("the warmer did not finish within 30s")
		}
		return func() { cancel(); <-done }
	}
	budget := NewCache(cacheMaxFile+60_000, true) // about 60 files of these, with the warmer's margin
	a, b := tree("A"), tree("B")
	a.ShareCache(budget)
	b.ShareCache(budget)
	stopA := run(a)
	stopB := run(b)
	defer stopB()
	ua, ub := a.Stats().CacheBytes, b.Stats().CacheBytes
	if ua == 0 || int64(ua+ub) != budget.Used() || budget.Used() > budget.Limit()/2+cacheMaxFile {
		t.Fatalf("two indexes read ahead %d and %d bytes; the budget says %d used of %d (read-ahead takes at most half)", ua, ub, budget.Used(), budget.Limit())
	}
	// What a search reads finds the room read-ahead left.
	re, _ := CompilePattern("class", true, false)
	if _, err := b.Grep(context.Background(), b.Root(), GrepOptions{Pattern: re, Limit: 1000, Budget: 1 << 20, MaxFile: 1 << 20, MaxLineLen: 300}); err != nil {
		t.Fatal(err)
	}
	if ub2 := b.Stats().CacheBytes; ub2 <= ub || budget.Used() > budget.Limit() || int64(ua+ub2) != budget.Used() {
		t.Fatalf("after a search of the second: it keeps %d bytes (%d before); the budget says %d of %d", ub2, ub, budget.Used(), budget.Limit())
	}
	ub = b.Stats().CacheBytes
	stopA()
	if budget.Used() != int64(ub) {
		t.Errorf("after the first index ended the budget says %d used, want %d (the second's)", budget.Used(), ub)
	}

	none := NewCache(0, true)
	c := tree("C")
	c.ShareCache(none)
	defer run(c)()
	if pg, err := c.Grep(context.Background(), c.Root(), GrepOptions{Pattern: re, Limit: 1000, Budget: 1 << 20, MaxFile: 1 << 20, MaxLineLen: 300}); err != nil || pg.Matches != 100 {
		t.Fatalf("a search with no cache: %d matches, %v; want 100 from the disk", pg.Matches, err)
	}
	if st := c.Stats(); st.CacheFiles != 0 || none.Used() != 0 {
		t.Errorf("a budget of nothing: %d files kept, %d bytes used", st.CacheFiles, none.Used())
	}

	// No read-ahead: nothing is kept until a search reads it.
	searched := NewCache(1<<20, false)
	d := tree("D")
	d.ShareCache(searched)
	defer run(d)()
	if searched.Used() != 0 {
		t.Fatalf("without read-ahead the warmer kept %d bytes", searched.Used())
	}
	if pg, err := d.Grep(context.Background(), d.Root(), GrepOptions{Pattern: re, Limit: 1000, Budget: 1 << 20, MaxFile: 1 << 20, MaxLineLen: 300}); err != nil || pg.Matches != 100 {
		t.Fatalf("a search without read-ahead: %d matches, %v", pg.Matches, err)
	}
	if st := d.Stats(); st.CacheFiles != 100 || searched.Used() != int64(st.CacheBytes) {
		t.Errorf("after a search without read-ahead: %d files, %d bytes kept; the budget says %d", st.CacheFiles, st.CacheBytes, searched.Used())
	}
}
