//go:build unix

package index

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkIndexBuild builds the index of a generated Flutter-like
// workspace (FLY_BENCH_FILES files, default 100000), without watches and
// with them, and in the same iteration walks the same tree three ways:
//   - walk: a bare parallel walk with the same number of workers, that
//     reads each directory with os.ReadDir and skips the skipped
//     directories, nothing more (no stat, no rules, no result);
//   - walkstat: walk plus one fstatat per regular file: what the index
//     cost when each File had a size and a time;
//   - walkdir: a plain filepath.WalkDir (DESIGN §7), skipping the same.
//
// ratio is index/walk, ratio-stat is index/walkstat. heap-B/file is the
// heap that one index keeps alive (its watcher included, with watches),
// per served file.
//
//	go test -run '^$' -bench IndexBuild -benchtime 10x ./daemon/
func BenchmarkIndexBuild(b *testing.B) {
	n := 100000
	if s := os.Getenv("FLY_BENCH_FILES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("FLY_BENCH_FILES=%q: want a number >= 100", s)
		}
	}
	root := idxTempDir(b)
	start := time.Now()
	want := idxGenTree(b, root, n)
	b.Logf("generated %d files (%d served) in %v", n, len(want), time.Since(start).Round(time.Millisecond))
	idxBareWalk(root, walkWorkers(), false) // warm the caches

	for _, bc := range []struct {
		name  string
		watch bool
	}{{"nowatch", false}, {"watch", true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var index, walk, walkStat, walkDir time.Duration
			var dirs int
			i := 0
			for b.Loop() {
				// Alternate the order, so that neither side always runs
				// right after the other one.
				if i%2 == 1 {
					walk += idxTimed(func() { dirs = idxBareWalk(root, walkWorkers(), false) })
					walkStat += idxTimed(func() { idxBareWalk(root, walkWorkers(), true) })
				}
				var x *Index
				index += idxTimed(func() {
					var err error
					if x, err = openIndex(root, DefaultRules(), nil, nil, bc.watch); err != nil {
						b.Fatal(err)
					}
				})
				if i%2 == 0 {
					walk += idxTimed(func() { dirs = idxBareWalk(root, walkWorkers(), false) })
					walkStat += idxTimed(func() { idxBareWalk(root, walkWorkers(), true) })
				}
				walkDir += idxTimed(func() { idxSeqWalk(b, root) })
				b.StopTimer()
				if x.Len() != len(want) {
					b.Fatalf("indexed %d files, want %d", x.Len(), len(want))
				}
				if st := x.Stats(); bc.watch && (st.Dirs != dirs || st.WatchErrors != 0) {
					b.Fatalf("watched %d directories with %d errors, want %d", st.Dirs, st.WatchErrors, dirs)
				}
				idxRelease(b, x) // closes the watcher
				b.StartTimer()
				i++
			}
			b.ReportMetric(idxHeapPerFile(b, root, bc.watch), "heap-B/file")
			ms := func(d time.Duration) float64 { return float64(d) / float64(i) / 1e6 }
			b.ReportMetric(ms(index), "index-ms")
			b.ReportMetric(ms(walk), "walk-ms")
			b.ReportMetric(ms(walkStat), "walkstat-ms")
			b.ReportMetric(ms(walkDir), "walkdir-ms")
			b.ReportMetric(float64(index)/float64(walk), "ratio")
			b.ReportMetric(float64(index)/float64(walkStat), "ratio-stat")
			b.ReportMetric(float64(dirs), "dirs")
		})
	}
}

// idxHeapPerFile builds one index of root and returns the heap it keeps
// alive, per served file.
func idxHeapPerFile(b *testing.B, root string, watch bool) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x, err := openIndex(root, DefaultRules(), nil, nil, watch)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := x.Len()
	idxRelease(b, x)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

func idxTimed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// idxBareWalk reads every directory under root that is not skipped, with
// a pool of workers, and returns how many it read. With stat, it also
// stats every regular file, relative to its directory.
func idxBareWalk(root string, workers int, stat bool) int {
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		stack   = []string{root}
		pending = 1
		nDirs   atomic.Int64
		wg      sync.WaitGroup
	)
	read := func(dir string, kids []string) []string {
		var ents []fs.DirEntry
		var fd int
		if stat {
			f, err := os.Open(dir)
			if err != nil {
				return kids
			}
			defer f.Close()
			ents, _ = f.ReadDir(-1)
			fd = int(f.Fd())
		} else {
			ents, _ = os.ReadDir(dir)
		}
		parent := filepath.Base(dir)
		for _, e := range ents {
			switch {
			case e.IsDir():
				if !skipDirElem(parent, e.Name()) {
					kids = append(kids, dir+"/"+e.Name())
				}
			case stat && e.Type().IsRegular():
				var st unix.Stat_t
				unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW)
			}
		}
		nDirs.Add(1)
		return kids
	}
	for range workers {
		wg.Go(func() {
			var kids []string
			done := false
			for {
				mu.Lock()
				if done {
					stack = append(stack, kids...)
					pending += len(kids) - 1
					if len(kids) > 0 || pending == 0 {
						cond.Broadcast()
					}
				}
				for len(stack) == 0 && pending > 0 {
					cond.Wait()
				}
				if len(stack) == 0 {
					mu.Unlock()
					return
				}
				dir := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				mu.Unlock()

				kids = read(dir, kids[:0])
				done = true
			}
		})
	}
	wg.Wait()
	return int(nDirs.Load())
}

// idxSeqWalk is filepath.WalkDir over root, skipping the skipped directories.
func idxSeqWalk(b *testing.B, root string) {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && skipDirElem(filepath.Base(filepath.Dir(p)), d.Name()) {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
