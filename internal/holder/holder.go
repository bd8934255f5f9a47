package holder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/proc"
)

// The holder of one run: its spec, starting the run's child, holding the
// run until flyd has its exit, and signalling the run's processes.

// Spec is what flyd starts a holder with, as JSON on the holder's stdin.
type Spec struct {
	Run     string   `json:"run"`     // the run's id
	Dir     string   `json:"dir"`     // the run's directory, which flyd made private
	Control string   `json:"control"` // the endpoint to listen on: a socket path, or a pipe name on Windows
	Path    string   `json:"path"`    // the child's executable, absolute
	Args    []string `json:"args"`    // its argv, the first its name
	Cwd     string   `json:"cwd"`     // its working directory
	Env     []string `json:"env"`     // its whole environment
	Stdin   bool     `json:"stdin"`   // flyd writes to its stdin
	// Mark is "NAME=value" in the environment of every process of the
	// run: a signal reaches those that left its group too (Linux).
	Mark         string `json:"mark,omitempty"`
	SegmentBytes int64  `json:"segment_bytes,omitempty"` // default 4 MiB
	SpoolBytes   int64  `json:"spool_bytes,omitempty"`   // default 64 MiB
}

// Bounds of a spec.
const (
	maxSpec             = 4 << 20
	defaultSegmentBytes = 4 << 20
	defaultSpoolBytes   = 64 << 20
	maxHandshake        = 64 << 10
)

// Timeouts of the holder's own.
const (
	// drainAfterExit is how long the holder reads output after the
	// child's leader exited, before it closes the pipes that something
	// that left the run still holds open.
	drainAfterExit = 3 * time.Second
	// retryFull is how often a holder whose spool is full tries again
	// when no ack frees room.
	retryFull = 500 * time.Millisecond
)

// lingerForAck is how long a holder whose run has ended waits for a
// connected flyd to acknowledge the exit, then goes; its files stay for
// the next flyd if none did. (A variable for the tests.)
var lingerForAck = 30 * time.Second

// handshake is the holder's one line on its stdout: its state, or why it
// could not start the run.
type handshake struct {
	Error string `json:"error,omitempty"`
	State *State `json:"state,omitempty"`
}

var runIDRE = regexp.MustCompile(`^[0-9a-z]{1,64}$`)

// Main is `flyd hold`: it reads a Spec on stdin, starts the run's child,
// answers on stdout (then closes it), and holds the run until it ends and
// flyd has its exit, or flyd is gone. stderr is its log. It returns the
// process's exit code.
func Main(args []string, stdin io.Reader, stdout io.WriteCloser, stderr io.Writer) int {
	lg := log.New(stderr, fmt.Sprintf("flyd hold[%d]: ", os.Getpid()), log.LstdFlags|log.Lmicroseconds)
	if len(args) > 0 {
		answer(stdout, handshake{Error: "flyd hold takes no arguments: flyd starts it, with a spec on its stdin"})
		return 2
	}
	signals := takeSignals()
	spec, err := readSpec(stdin)
	if err != nil {
		answer(stdout, handshake{Error: err.Error()})
		return 2
	}
	h, err := start(spec, lg)
	if err != nil {
		lg.Print(err)
		answer(stdout, handshake{Error: err.Error()})
		return 1
	}
	st := h.stateNow()
	answer(stdout, handshake{State: &st})
	stdout.Close() // flyd has what it needs; a flyd gone meanwhile changes nothing
	return h.run(signals)
}

func answer(w io.Writer, hs handshake) {
	b, _ := json.Marshal(hs)
	_, _ = w.Write(append(b, '\n'))
}

// readSpec reads and checks the spec, bounded.
func readSpec(r io.Reader) (Spec, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSpec+1))
	if err != nil {
		return Spec{}, fmt.Errorf("read the run's spec: %w", err)
	}
	if len(b) > maxSpec {
		return Spec{}, fmt.Errorf("the run's spec is over %d bytes", maxSpec)
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return Spec{}, fmt.Errorf("read the run's spec: %w", err)
	}
	switch {
	case !runIDRE.MatchString(s.Run):
		return Spec{}, fmt.Errorf("the spec's run id %q is not one", s.Run)
	case !filepath.IsAbs(s.Dir) || !filepath.IsAbs(s.Path) || len(s.Args) == 0 || s.Control == "":
		return Spec{}, errors.New("the spec lacks its directory, executable, arguments or control endpoint")
	}
	if fi, err := os.Stat(s.Dir); err != nil || !fi.IsDir() {
		return Spec{}, fmt.Errorf("the run's directory %s: %v", s.Dir, err)
	}
	if s.SegmentBytes <= 0 {
		s.SegmentBytes = defaultSegmentBytes
	}
	if s.SpoolBytes <= 0 {
		s.SpoolBytes = defaultSpoolBytes
	}
	s.SegmentBytes = min(max(s.SegmentBytes, 64<<10), 256<<20)
	s.SpoolBytes = max(s.SpoolBytes, 2*s.SegmentBytes)
	return s, nil
}

// holder holds one run.
type holder struct {
	spec   Spec
	log    *log.Logger
	spool  *spool
	ln     net.Listener
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File    // the write end of the child's stdin; nil without one
	outs   [2]*os.File // the read ends of its stdout and stderr
	stdinQ chan []byte // bounded: what flyd wrote for the child's stdin

	smu     sync.Mutex // held across a write of the state file
	mu      sync.Mutex
	state   State
	conn    *peer         // the connection flyd speaks on; nil while none
	exitSeq uint64        // the exit record's seq, once spooled
	acked   chan struct{} // closed once flyd acknowledged the exit record
	ackOnce sync.Once
	ended   bool // the group is released: it is never signalled again
	killed  bool // flyd asked for a kill: on Windows the exit has no signal to say so
	conns   int  // how many flyds have connected
	blocked int  // readers waiting for room in the spool
	full    bool // the spool is full: blocked > 0

	stop chan struct{}  // closed when the holder goes: its goroutines leave
	wg   sync.WaitGroup // the acceptor, connections, reaper, stdin writer, signal handler

	told     chan struct{} // closed once the holder itself was signalled to end: it waits for no flyd still to come
	toldOnce sync.Once
	dropping atomic.Bool // told to end with the spool full and no flyd: output is let go
}

// start makes the spool, listens, and starts the child.
func start(spec Spec, lg *log.Logger) (*holder, error) {
	h := &holder{spec: spec, log: lg, stdinQ: make(chan []byte, 256), acked: make(chan struct{}), stop: make(chan struct{}), told: make(chan struct{})}
	var err error
	if h.spool, err = newSpool(spec.Dir, spec.SegmentBytes, spec.SpoolBytes); err != nil {
		return nil, err
	}
	if h.ln, err = ipc.Listen(spec.Control); err != nil {
		h.spool.close()
		return nil, fmt.Errorf("listen for flyd: %w", err)
	}
	if err := adopt(); err != nil {
		lg.Printf("not the subreaper of the run (what it orphans goes to init): %v", err)
	}
	if err := h.startChild(); err != nil {
		h.ln.Close()
		h.spool.close()
		return nil, err
	}
	self, _ := proc.StartTime(os.Getpid())
	child, _ := proc.StartTime(h.pid)
	h.state = State{Format: spoolFormat, Run: spec.Run, Protocol: Versions(), Holder: Proc{os.Getpid(), self},
		Child: Proc{h.pid, child}, Control: spec.Control, Job: jobOf(h.pid)}
	if err := writeState(spec.Dir, h.state); err != nil {
		_ = h.signalTree(proc.Kill)
		_ = h.cmd.Wait()
		h.ln.Close()
		h.spool.close()
		return nil, err
	}
	return h, nil
}

// startChild starts the run's child as the leader of a group of its own,
// its stdout and stderr pipes the holder's to read.
func (h *holder) startChild() error {
	s := h.spec
	cmd := &exec.Cmd{Path: s.Path, Args: s.Args, Dir: s.Cwd, Env: s.Env}
	var childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := range h.outs {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(childEnds)
			closeAll(h.outs[:])
			return fmt.Errorf("start %s: %w", s.Path, err)
		}
		h.outs[i] = r
		childEnds = append(childEnds, w)
	}
	cmd.Stdout, cmd.Stderr = childEnds[0], childEnds[1]
	if s.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(childEnds)
			closeAll(h.outs[:])
			return fmt.Errorf("start %s: %w", s.Path, err)
		}
		cmd.Stdin, h.stdin = r, w
		childEnds = append(childEnds, r)
	}
	err := proc.StartGroup(cmd)
	closeAll(childEnds) // the child has its copies
	if err != nil {
		closeAll(h.outs[:])
		if h.stdin != nil {
			h.stdin.Close()
		}
		return fmt.Errorf("start %s: %w", s.Path, err)
	}
	h.cmd, h.pid = cmd, cmd.Process.Pid
	return nil
}

func (h *holder) stateNow() State {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

// saveState writes the state file after change, which changes h.state
// under h.mu.
func (h *holder) saveState(change func(*State)) {
	h.smu.Lock()
	defer h.smu.Unlock()
	h.mu.Lock()
	change(&h.state)
	st := h.state
	h.mu.Unlock()
	if err := writeState(h.spec.Dir, st); err != nil {
		h.log.Print(err)
	}
}

// run holds the run until it has ended and flyd has its exit, or flyd is
// not there to take it; it returns the holder's exit code.
func (h *holder) run(signals <-chan os.Signal) int {
	h.wg.Go(h.accept)
	h.wg.Go(func() { reapOrphans(h.pid, h.stop) })
	h.wg.Go(h.writeStdin)
	h.wg.Go(func() {
		forwardSignals(signals, h.stop, func(sig proc.Signal) error {
			h.toldOnce.Do(func() { close(h.told) })
			return h.signalTree(sig)
		})
	})

	var readers sync.WaitGroup
	readers.Go(func() { h.read(h.outs[0], TypeStdout) })
	readers.Go(func() { h.read(h.outs[1], TypeStderr) })
	waitErr := h.cmd.Wait()
	h.log.Printf("the run's leader (pid %d) ended: %s", h.pid, describe(h.cmd, waitErr))
	drained := make(chan struct{})
	go func() { // owned by run: waited for below
		readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(drainAfterExit):
		// Something that left the run holds its output open: stop
		// reading it (a reader waiting for room in the spool keeps what
		// it read, and ends after).
		for _, f := range h.outs {
			f.Close()
		}
		<-drained
	}
	// Nothing of a run outlives it: what is left of its group, what left
	// the group, what it orphaned.
	_ = h.signalTree(proc.Kill)
	h.mu.Lock()
	h.ended = true
	h.mu.Unlock()
	proc.Release(h.pid)
	for _, f := range h.outs {
		f.Close()
	}

	exit := Exit{Code: -1, Desc: describe(h.cmd, waitErr)}
	if ps := h.cmd.ProcessState; ps != nil {
		exit.Code = ps.ExitCode()
	}
	h.mu.Lock()
	if h.killed && !strings.HasPrefix(exit.Desc, "killed") {
		exit.Desc = "killed at flyd's request (" + exit.Desc + ")" // a terminated job object: only an exit code
	}
	h.mu.Unlock()
	h.saveState(func(s *State) { s.Exit = &exit })
	data, _ := json.Marshal(exit)
	h.mu.Lock()
	c0, n0 := h.conn, h.conns // who may take the exit record as it is spooled
	h.mu.Unlock()
	seq := h.spoolWait([]Record{{Type: TypeExit, Time: time.Now(), Data: data}})
	exit.Seq = seq
	h.saveState(func(s *State) { s.Exit = &exit })
	h.mu.Lock()
	h.exitSeq = seq
	h.mu.Unlock()
	if seq != 0 && h.spool.ackedUpTo() >= seq { // flyd was quicker than this
		h.ackOnce.Do(func() { close(h.acked) })
	}

	// Wait for flyd to take the exit: the one connected, or one that is
	// still to come (a run that ended at once may end before the flyd
	// that started it has dialled); a connection that ends first, or
	// none within lingerForAck, leaves the files for the next flyd.
	acked := false
	linger := time.NewTimer(lingerForAck)
	defer linger.Stop()
	look := time.NewTicker(50 * time.Millisecond)
	defer look.Stop()
waiting:
	for {
		h.mu.Lock()
		c, n := h.conn, h.conns
		h.mu.Unlock()
		if c == nil && (c0 != nil || n > n0) {
			h.log.Print("flyd went before it acknowledged the run's exit: leaving the spool for the next flyd")
			break
		}
		if c == nil && h.isTold() { // stopped with everything else (a service stop, a package removal): no flyd is coming
			h.log.Print("told to end with no flyd connected: leaving the spool for the next flyd")
			break
		}
		var gone <-chan struct{} // nil, never ready, while no flyd is connected
		if c != nil {
			gone = c.closed
		}
		select {
		case <-h.acked:
			acked = true
			break waiting
		case <-gone:
			h.log.Print("flyd went before it acknowledged the run's exit: leaving the spool for the next flyd")
			break waiting
		case <-linger.C:
			h.log.Print("flyd did not acknowledge the run's exit: leaving the spool for the next flyd")
			break waiting
		case <-look.C: // a flyd may have connected
		}
	}
	select {
	case <-h.acked: // it may have come with the exit record's send
		acked = true
	default:
	}
	close(h.stop)
	h.ln.Close()
	h.mu.Lock()
	if h.conn != nil {
		h.conn.close()
	}
	h.mu.Unlock()
	h.wg.Wait()
	h.spool.close()
	if acked {
		// flyd has all of it: nothing of the run is left, this log (the
		// holder's stderr, a file in the directory) neither. It is closed
		// first, and the holder leaves the directory: Windows removes no
		// file a process holds open.
		out := h.log.Writer()
		if c, ok := out.(io.Closer); ok {
			h.log.SetOutput(io.Discard)
			c.Close()
		}
		_ = os.Chdir(filepath.Dir(h.spec.Dir)) // nor the working directory of a process
		if err := os.RemoveAll(h.spec.Dir); err != nil {
			h.log.SetOutput(out) // still open when it was no file
			h.log.Print(err)
		}
	} else {
		_ = os.Remove(h.spec.Control) // a flyd that comes finds nobody, and reads the files
	}
	return 0
}

// describe says how the child ended: "exit code 1", "killed by killed".
func describe(cmd *exec.Cmd, waitErr error) string {
	ps := cmd.ProcessState
	if ps == nil {
		if waitErr != nil {
			return waitErr.Error()
		}
		return "unknown exit"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode())
}

// signalTree sends sig to the run's group, to the processes that carry
// its mark, and for a kill to what the holder adopted; nothing once the
// group is released.
func (h *holder) signalTree(sig proc.Signal) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return nil
	}
	err := proc.SignalGroup(h.pid, sig)
	if h.spec.Mark != "" {
		for _, p := range proc.WithEnv(h.spec.Mark) {
			_ = proc.SignalProcess(p, sig)
		}
	}
	if sig == proc.Kill {
		for _, p := range proc.Children(false) {
			if p != h.pid {
				_ = proc.SignalProcess(p, proc.Kill)
			}
		}
	}
	return err
}
