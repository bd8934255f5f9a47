package holder

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/proc"
)

// The test binary is also the holder (os.Args[1] == "hold", as flyd's
// main dispatches it) and the child it holds (envChild).
const (
	envChild      = "FLY_HOLDER_TEST_CHILD"
	envChildLines = "FLY_HOLDER_TEST_LINES"
	envLinger     = "FLY_HOLDER_TEST_LINGER" // the holder's lingerForAck
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "hold" {
		if d, err := time.ParseDuration(os.Getenv(envLinger)); err == nil {
			lingerForAck = d
		}
		os.Exit(Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if os.Getenv(envChild) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child prints envChildLines numbered lines on stdout (and every tenth a
// line on stderr), then obeys its stdin: "print X" prints X, "flood N"
// prints N more numbered lines, "exit N" exits with N.
func child() int {
	n, _ := strconv.Atoi(os.Getenv(envChildLines))
	flood(n)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "print":
			fmt.Println(arg)
		case "flood":
			n, _ := strconv.Atoi(arg)
			flood(n)
		case "exit":
			code, _ := strconv.Atoi(arg)
			return code
		}
	}
	select {} // stdin ended: a run goes on, as flutter does
}

func flood(n int) {
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "line %d\n", i)
		if i%10 == 0 {
			w.Flush()
			fmt.Fprintf(os.Stderr, "err %d\n", i)
		}
	}
	w.Flush()
}

// startHolder starts a holder of the test binary as its child, printing
// lines lines, and returns its directory and state.
func startHolder(t *testing.T, lines int) (string, State) {
	return startHolderWith(t, lines, 64<<10)
}

func startHolderWith(t *testing.T, lines int, segment int64) (string, State) {
	t.Helper()
	return startHolderSpec(t, lines, func(s *Spec) { s.SegmentBytes = segment })
}

// startHolderSpec is startHolder with the spec as set changes it.
func startHolderSpec(t *testing.T, lines int, set func(*Spec)) (string, State) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hold")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, logFile))
			t.Logf("the holder's log:\n%s", b)
		}
		os.RemoveAll(dir)
	})
	spec := Spec{Run: "01testrun", Dir: dir, Control: controlOf(dir), Path: self, Args: []string{"child"}, Cwd: dir,
		Env: append(os.Environ(), envChild+"=1", envChildLines+"="+strconv.Itoa(lines)), Stdin: true}
	set(&spec)
	st, err := Start(context.Background(), self, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = proc.SignalGroup(st.Child.PID, proc.Kill)
		_ = proc.SignalProcess(st.Holder.PID, proc.Kill)
		Reap(st.Holder.PID)
	})
	return dir, st
}

// collect reads messages from c until want holds, and returns the lines
// of stdout and the exit, if it came.
type collected struct {
	out, errs []string
	seqs      []uint64
	exit      string
	last      uint64
}

func (col *collected) read(t *testing.T, c *Conn, until func(*collected) bool) {
	t.Helper()
	for !until(col) {
		m, err := c.Next()
		if err != nil {
			t.Fatalf("Next after %d lines: %v", len(col.out), err)
		}
		if m.Spool != nil || m.Ping {
			continue
		}
		if m.Seq <= col.last {
			t.Fatalf("seq %d after %d: a record taken twice", m.Seq, col.last)
		}
		if col.last != 0 && m.Seq != col.last+1 {
			t.Fatalf("seq %d after %d: records lost", m.Seq, col.last)
		}
		col.last = m.Seq
		col.seqs = append(col.seqs, m.Seq)
		switch m.Type {
		case TypeStdout:
			col.out = append(col.out, string(m.Data))
		case TypeStderr:
			col.errs = append(col.errs, string(m.Data))
		case TypeExit:
			col.exit = string(m.Data)
		}
	}
}

// TestHolderKeepsEveryLineAcrossReconnects: flyd reads part of the run's
// output and goes; the holder spools the rest; flyd comes back after
// the last seq it had, and gets the rest exactly once; its stdin and the
// run's exit go through; an acknowledged exit leaves nothing behind.
func TestHolderKeepsEveryLineAcrossReconnects(t *testing.T) {
	const n = 20000
	dir, st := startHolder(t, n)
	c, err := Dial(context.Background(), st.Control, st.Run, 0)
	if err != nil {
		t.Fatal(err)
	}
	var col collected
	col.read(t, c, func(c *collected) bool { return len(c.out) >= 5000 })
	c.Close()

	// Meanwhile, the child prints the rest into the spool.
	eventually(t, "the spool holding the last lines", func() bool {
		texts, _, _ := readAll(t, dir, 0)
		return slices.Contains(texts, fmt.Sprintf("line %d", n)) && slices.Contains(texts, fmt.Sprintf("err %d", n))
	})
	if !st.Holder.Same() || !st.Child.Same() {
		t.Fatal("the holder or its child died with flyd's connection")
	}
	c, err = Dial(context.Background(), st.Control, st.Run, col.last)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	col.read(t, c, func(c *collected) bool { return len(c.out) == n && len(c.errs) == n/10 })
	for i, l := range col.out {
		if l != fmt.Sprintf("line %d", i+1) {
			t.Fatalf("line %d is %q", i+1, l)
		}
	}
	if err := c.Ack(col.last); err != nil {
		t.Fatal(err)
	}
	if err := c.Stdin([]byte("print hello\n")); err != nil {
		t.Fatal(err)
	}
	col.read(t, c, func(c *collected) bool { return c.out[len(c.out)-1] == "hello" })
	if err := c.Stdin([]byte("exit 3\n")); err != nil {
		t.Fatal(err)
	}
	col.read(t, c, func(c *collected) bool { return c.exit != "" })
	if !strings.Contains(col.exit, `"code":3`) {
		t.Errorf("exit record %s, want code 3", col.exit)
	}
	// The state names the exit's record once it is spooled (it is sent on
	// as it is spooled, so the state may lag the connection a moment).
	var s State
	eventually(t, "the state naming the exit's record", func() bool {
		s, err = ReadState(dir)
		return err == nil && s.Exit != nil && s.Exit.Seq != 0
	})
	if err != nil || s.Exit == nil || s.Exit.Code != 3 || s.Exit.Seq != col.last {
		t.Errorf("state after the exit = %+v, %v", s.Exit, err)
	}
	if err := c.Ack(col.last); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the holder and its directory gone after an acknowledged exit", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err) && !st.Holder.Same()
	})
}

// TestHolderSignal: a kill through the holder ends the run, and the exit
// says so; a holder whose flyd is gone when its run ends leaves its
// files for the next.
func TestHolderSignal(t *testing.T) {
	dir, st := startHolder(t, 10)
	c, err := Dial(context.Background(), st.Control, st.Run, 0)
	if err != nil {
		t.Fatal(err)
	}
	var col collected
	col.read(t, c, func(c *collected) bool { return len(c.out) == 10 && len(c.errs) == 1 }) // all it prints before it waits
	done := make(chan error, 1)
	go func() { done <- c.Signal(context.Background(), proc.Kill) }() // owned by the test: waited for below
	col.read(t, c, func(c *collected) bool { return c.exit != "" })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(col.exit, "killed") {
		t.Errorf("exit %s, want killed", col.exit)
	}
	c.Close() // gone without an ack
	eventually(t, "the holder of an ended run gone", func() bool { return !st.Holder.Same() })
	s, err := ReadState(dir)
	if err != nil || s.Exit == nil {
		t.Fatalf("the state file of an unacknowledged exit = %+v, %v", s, err)
	}
	texts, _, _ := readAll(t, dir, 0)
	if len(texts) != 10+1+1 { // the lines, one stderr line, the exit
		t.Errorf("the spool left holds %d records: %q", len(texts), texts)
	}
}

// TestHolderVersions: a flyd that speaks no version the holder does is
// refused with the versions of each; a newer one speaks the holder's.
func TestHolderVersions(t *testing.T) {
	_, st := startHolder(t, 0)
	defer func(lo, hi string) { protocolMin, protocolVersion = lo, hi }(protocolMin, protocolVersion)
	protocolMin, protocolVersion = "2", "3"
	_, err := Dial(context.Background(), st.Control, st.Run, 0)
	if ve, ok := err.(*VersionError); !ok || ve.Holder != (Range{1, 1}) {
		t.Fatalf("Dial from a flyd of versions 2…3 = %v, want a VersionError naming 1…1", err)
	}
	protocolMin = "1"
	c, err := Dial(context.Background(), st.Control, st.Run, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Version() != 1 {
		t.Errorf("a flyd of 1…3 and a holder of 1…1 speak %d, want 1", c.Version())
	}
}

// TestHolderStartFails: a child that cannot start is the holder's
// answer, and no holder is left.
func TestHolderStartFails(t *testing.T) {
	self, _ := os.Executable()
	dir := t.TempDir()
	_, err := Start(context.Background(), self, Spec{Run: "01nope", Dir: dir, Control: controlOf(dir), Path: filepath.Join(dir, "missing"), Args: []string{"missing"}, Cwd: dir})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Start of a missing executable = %v", err)
	}
}

var _ = exec.Command

// eventually waits, for a minute at most, until cond holds. A holder's
// files and processes send a test no event: looking again every 10 ms is
// how the condition is waited on (internal/flytest's Eventually, which
// does the same, imports this package).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}
