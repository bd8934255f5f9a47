package holder

import (
	"bytes"
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
	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/proc"
)

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

// read turns one of the child's outputs into records of lines, spooled
// before anything else sees them: a line over MaxLine is cut to it and
// flagged, its rest skipped. While the spool is full it reads no more,
// and the child blocks on its full pipe.
func (h *holder) read(f *os.File, t Type) {
	buf := make([]byte, 64<<10)
	var (
		line  []byte // the line read so far, at most MaxLine+1 bytes
		skip  bool   // the rest of a cut line is skipped
		recs  []Record
		arena []byte
	)
	emit := func(b []byte, cut bool, now time.Time) {
		start := len(arena)
		arena = append(arena, b...)
		recs = append(recs, Record{Type: t, Cut: cut, Time: now, Data: arena[start:len(arena):len(arena)]})
	}
	for {
		n, err := f.Read(buf)
		now := time.Now()
		for data := buf[:n]; len(data) > 0; {
			i := bytes.IndexByte(data, '\n')
			part := data
			if i >= 0 {
				part, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			if !skip {
				room := MaxLine + 1 - len(line) // one more: a \r before the newline
				if len(part) > room {
					line = append(line, part[:room]...)
					emit(line[:MaxLine], true, now)
					line, skip = line[:0], true
				} else {
					line = append(line, part...)
				}
			}
			if i >= 0 {
				if !skip {
					l := bytes.TrimSuffix(line, []byte("\r"))
					if len(l) > MaxLine {
						emit(l[:MaxLine], true, now)
					} else {
						emit(l, false, now)
					}
				}
				line, skip = line[:0], false
			}
		}
		if err != nil && len(line) > 0 && !skip {
			emit(line, false, now) // the last line, without its newline
		}
		if len(recs) > 0 {
			h.spoolWait(recs)
			clear(recs)
			recs, arena = recs[:0], arena[:0]
			if cap(arena) > 1<<20 {
				arena = nil
			}
		}
		if err != nil {
			return
		}
	}
}

// spoolWait appends recs to the spool, waiting as long as it takes for
// room, and returns the last one's seq; 0 when it let them go (see
// abandoned).
func (h *holder) spoolWait(recs []Record) uint64 {
	blocked := false
	for {
		_, room := h.spool.signals()
		seq, err := h.spool.append(recs)
		if err == nil {
			if blocked {
				h.setBlocked(-1, nil)
			}
			return seq
		}
		if !blocked {
			blocked = true
			h.setBlocked(1, err)
		}
		if h.abandoned() {
			// Told to end, and nobody to make room: waiting would keep the
			// holder forever (its readers never end). What the spool holds
			// stays for the next flyd; these records are let go.
			if h.dropping.CompareAndSwap(false, true) {
				h.log.Printf("told to end with the spool full and no flyd connected: the run's output from here on is not kept (%v)", err)
			}
			return 0 // still counted blocked: the spool is still full, as the state file says
		}
		select {
		case <-room:
		case <-h.told:
		case <-time.After(retryFull):
			h.remindFull()
		}
	}
}

// isTold reports whether the holder itself was signalled to end.
func (h *holder) isTold() bool {
	select {
	case <-h.told:
		return true
	default:
		return false
	}
}

// abandoned reports whether the holder was told to end while no flyd is
// connected to take what it holds.
func (h *holder) abandoned() bool {
	if !h.isTold() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn == nil
}

// remindFull tells flyd again that the spool is full: a flyd that has
// taken every record acknowledges them on it, and that makes the room.
func (h *holder) remindFull() {
	h.mu.Lock()
	c, full, why := h.conn, h.full, h.state.Spool
	h.mu.Unlock()
	if c != nil && full {
		_ = c.write(controlRecord(message{T: msgSpool, Full: true, Err: why}))
	}
}

// setBlocked counts a reader that waits for room in the spool (delta 1,
// with why) or got it (-1). While any waits, the spool is full: the
// state file and flyd are told when that changes.
func (h *holder) setBlocked(delta int, why error) {
	h.mu.Lock()
	h.blocked += delta
	full := h.blocked > 0
	if full == h.full {
		h.mu.Unlock()
		return
	}
	h.full = full
	c := h.conn
	h.mu.Unlock()
	m := message{T: msgSpool}
	if full {
		m.Full, m.Err = true, why.Error()
		h.log.Printf("the spool is full, holding the run's output back: %v", why)
	} else {
		h.log.Print("the spool has room again")
	}
	h.saveState(func(s *State) { s.Spool = m.Err })
	if c != nil {
		_ = c.write(controlRecord(m))
	}
}

// writeStdin writes what flyd sent for the child's stdin, in order.
func (h *holder) writeStdin() {
	for {
		select {
		case b := <-h.stdinQ:
			if h.stdin == nil {
				continue
			}
			if _, err := h.stdin.Write(b); err != nil {
				h.log.Printf("the run's stdin: %v", err)
				h.stdin.Close()
				h.stdin = nil
			}
		case <-h.stop:
			if h.stdin != nil {
				h.stdin.Close()
			}
			return
		}
	}
}

// accept takes flyd's connections; the newest replaces the one before.
func (h *holder) accept() {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			select {
			case <-h.stop:
			default:
				h.log.Printf("accept: %v", err)
			}
			return
		}
		if p, err := ipc.PeerOf(c); err != nil || p.User != owner.Current() {
			h.log.Printf("refused a connection from another user (%v)", err)
			c.Close()
			continue
		}
		conns.Go(func() { h.serve(c) })
	}
}

// peer is a connection of flyd's.
type peer struct {
	c      net.Conn
	wmu    sync.Mutex
	closed chan struct{}
	once   sync.Once
}

// write writes b, whole records, within writeTimeout; a failure ends the
// connection.
func (p *peer) write(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_ = p.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := p.c.Write(b); err != nil {
		p.close()
		return err
	}
	return nil
}

func (p *peer) close() {
	p.once.Do(func() {
		close(p.closed)
		p.c.Close()
	})
}

// serve speaks to flyd on c: the banner, its hello, then the records
// after what it has, and its requests, until either side goes.
func (h *holder) serve(c net.Conn) {
	p := &peer{c: c, closed: make(chan struct{})}
	defer p.close()
	v := Versions()
	if p.write(controlRecord(message{T: msgBanner, Min: v.Min, Max: v.Max, PID: os.Getpid(), Run: h.spec.Run})) != nil {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	d := newDecoder(c)
	r, err := d.next()
	if err != nil || r.Type != typeControl {
		h.log.Printf("a connection without a hello: %v", err)
		return
	}
	hello, err := parseControl(r.Data)
	if err != nil || hello.T != msgHello || hello.V < v.Min || hello.V > v.Max {
		h.log.Printf("a hello this holder cannot answer (%+v, %v)", hello, err)
		return
	}
	_ = c.SetReadDeadline(time.Time{})

	h.mu.Lock()
	select {
	case <-h.stop:
		h.mu.Unlock()
		return
	default:
	}
	if old := h.conn; old != nil {
		old.close() // a newer flyd: the old one is gone, or will be
	}
	h.conn = p
	h.conns++
	full, why := h.full, h.state.Spool
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.conn == p {
			h.conn = nil
		}
		h.mu.Unlock()
	}()
	if full {
		_ = p.write(controlRecord(message{T: msgSpool, Full: true, Err: why}))
	}
	var sender sync.WaitGroup
	defer sender.Wait()
	sender.Go(func() { h.send(p, hello.After) })
	defer p.close() // before waiting for the sender: it stops on it
	for {
		r, err := d.next()
		if err != nil {
			return
		}
		switch r.Type {
		case typeStdin:
			select {
			case h.stdinQ <- bytes.Clone(r.Data):
			default:
				h.log.Print("the run's stdin queue is full: a request from flyd was dropped")
			}
		case typeControl:
			m, err := parseControl(r.Data)
			if err != nil {
				h.log.Print(err)
				return
			}
			h.control(p, m)
		default:
			h.log.Printf("a record of type %d from flyd", r.Type)
			return
		}
	}
}

// control answers one control message from flyd.
func (h *holder) control(p *peer, m message) {
	switch m.T {
	case msgAck:
		h.spool.ack(m.Seq)
		h.mu.Lock()
		done := h.exitSeq != 0 && m.Seq >= h.exitSeq
		h.mu.Unlock()
		if done {
			h.ackOnce.Do(func() { close(h.acked) })
		}
	case msgSignal:
		sig := proc.Terminate
		if m.Sig == sigKill {
			sig = proc.Kill
			h.mu.Lock()
			h.killed = !h.ended
			h.mu.Unlock()
		}
		reply := message{T: msgReply, ID: m.ID}
		if err := h.signalTree(sig); err != nil {
			reply.Err = err.Error()
		}
		_ = p.write(controlRecord(reply))
	case msgMeta:
		if len(m.VM) <= 2048 {
			h.saveState(func(s *State) { s.VMService = m.VM })
		}
	}
}

// send sends flyd the spool's records after seq after, then each new one
// as it is spooled, and pings when there is nothing to send.
func (h *holder) send(p *peer, after uint64) {
	pos, err := h.spool.locate(after)
	if err != nil {
		h.log.Printf("find seq %d in the spool: %v", after+1, err)
		p.close()
		return
	}
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	buf := make([]byte, 256<<10)
	ping := time.NewTimer(pingEvery)
	defer ping.Stop()
	for {
		grew, _ := h.spool.signals()
		n, moved, err := h.spool.readAt(&pos, &f, buf)
		if err != nil {
			h.log.Printf("read the spool: %v", err)
			p.close()
			return
		}
		if n > 0 {
			// Send whole records only: control frames go between them.
			whole := wholeRecords(buf[:n])
			pos.off -= int64(n - whole)
			if whole == 0 {
				h.log.Print("the spool holds a record larger than a read")
				p.close()
				return
			}
			if p.write(buf[:whole]) != nil {
				return
			}
			ping.Reset(pingEvery)
			continue
		}
		if moved {
			continue
		}
		select {
		case <-grew:
		case <-p.closed:
			return
		case <-ping.C:
			if p.write(controlRecord(message{T: msgPing})) != nil {
				return
			}
			ping.Reset(pingEvery)
		}
	}
}

// wholeRecords returns the length of the whole records at the start of b.
func wholeRecords(b []byte) int {
	off := 0
	for len(b)-off >= HeaderLen {
		n := HeaderLen + int(be.Uint32(b[off:]))
		if len(b)-off < n {
			break
		}
		off += n
	}
	return off
}
