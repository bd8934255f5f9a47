package holder

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/proc"
)

// flyd's side of a holder: starting one, reading its files, and the
// control connection.

// logFile is the holder's log, its stderr, in the run's directory.
const logFile = "holder.log"

// Start starts `exe hold` (exe is flyd's own binary) for spec, detached
// in a session of its own, and returns its state once it has started the
// run's child, or why it could not. The holder is not this process's to
// wait for: its run outlives this process. A holder that has ended is
// left a zombie until Reap (or a subreaper's loop) takes it.
func Start(ctx context.Context, exe string, spec Spec) (State, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return State{}, fmt.Errorf("start the run's holder: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(spec.Dir, logFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return State{}, fmt.Errorf("start the run's holder: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "hold")
	cmd.Dir = spec.Dir
	cmd.Stderr = logf
	in, err := cmd.StdinPipe()
	if err != nil {
		return State{}, fmt.Errorf("start the run's holder: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return State{}, fmt.Errorf("start the run's holder: %w", err)
	}
	if err := proc.StartDetached(cmd); err != nil {
		return State{}, fmt.Errorf("start the run's holder: %w", err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	fail := func(err error) (State, error) {
		_ = proc.SignalProcess(pid, proc.Kill)
		in.Close()
		out.Close()
		Reap(pid)
		return State{}, fmt.Errorf("start the run's holder: %w", err)
	}
	type result struct {
		hs  handshake
		err error
	}
	got := make(chan result, 1)
	go func() { // owned by Start: it returns once this has, at the latest when the pipes close below
		if _, err := in.Write(b); err != nil {
			got <- result{err: fmt.Errorf("send it the run's spec: %w", err)}
			return
		}
		in.Close()
		line, err := bufio.NewReaderSize(io.LimitReader(out, maxHandshake), maxHandshake).ReadBytes('\n')
		if err != nil {
			got <- result{err: fmt.Errorf("read its answer: %w (its log: %s)", err, filepath.Join(spec.Dir, logFile))}
			return
		}
		var hs handshake
		if err := json.Unmarshal(line, &hs); err != nil {
			got <- result{err: fmt.Errorf("read its answer: %w", err)}
			return
		}
		got <- result{hs: hs}
	}()
	t := time.NewTimer(handshakeTimeout)
	defer t.Stop()
	var res result
	select {
	case res = <-got:
	case <-t.C:
		_ = proc.SignalProcess(pid, proc.Kill)
		in.Close()
		out.Close()
		<-got
		Reap(pid)
		return State{}, fmt.Errorf("start the run's holder: it did not answer within %v", handshakeTimeout)
	case <-ctx.Done():
		_ = proc.SignalProcess(pid, proc.Kill)
		in.Close()
		out.Close()
		<-got
		Reap(pid)
		return State{}, fmt.Errorf("start the run's holder: %w", ctx.Err())
	}
	out.Close()
	switch {
	case res.err != nil:
		return fail(res.err)
	case res.hs.Error != "":
		Reap(pid)
		return State{}, errors.New(res.hs.Error)
	case res.hs.State == nil || res.hs.State.Holder.PID != pid:
		return fail(errors.New("its answer does not name it"))
	}
	return *res.hs.State, nil
}

// Reap waits, briefly, for a holder that has ended, if it is this
// process's child: it leaves no zombie.
func Reap(pid int) {
	for range 20 {
		if ok, _ := proc.Alive(pid); !ok {
			_ = proc.Reap(pid)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Remove deletes a run's directory: its holder is gone, and flyd has
// taken everything it held.
func Remove(dir string) error { return os.RemoveAll(dir) }

// ErrNoHolder: nothing listens at a holder's control endpoint.
var ErrNoHolder = errors.New("the run's holder is not there")

// VersionError is Dial's error for a holder that speaks no version this
// flyd does.
type VersionError struct {
	Holder, Flyd Range
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("the run's holder speaks protocol %d…%d, this flyd %d…%d", e.Holder.Min, e.Holder.Max, e.Flyd.Min, e.Flyd.Max)
}

// Conn is flyd's connection to the holder of one run. Next is for one
// goroutine (the run's reader); the others may be called from any.
type Conn struct {
	c       net.Conn
	d       *decoder
	version int
	holder  int
	armed   time.Time // when Next last moved the read deadline

	wmu     sync.Mutex
	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]chan string
	closed  chan struct{}
	once    sync.Once
}

// Dial connects to the holder of run at the endpoint control, agrees on
// a version, and asks for the records after seq after. A holder that is
// not there fails with ErrNoHolder; one that speaks no version this flyd
// speaks, with a *VersionError.
func Dial(ctx context.Context, control, run string, after uint64) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	c, err := ipc.Dial(ctx, control)
	if err != nil {
		if ipc.NoListener(err) {
			return nil, fmt.Errorf("%w: %v", ErrNoHolder, err)
		}
		return nil, fmt.Errorf("connect to the run's holder: %w", err)
	}
	hc := &Conn{c: c, d: newDecoder(c), waiting: make(map[uint64]chan string), closed: make(chan struct{})}
	if err := hc.hello(run, after); err != nil {
		c.Close()
		return nil, err
	}
	return hc, nil
}

// hello reads the banner and answers it.
func (c *Conn) hello(run string, after uint64) error {
	_ = c.c.SetDeadline(time.Now().Add(handshakeTimeout))
	r, err := c.d.next()
	if err != nil {
		return fmt.Errorf("connect to the run's holder: read its banner: %w", err)
	}
	var b message
	if r.Type == typeControl {
		b, err = parseControl(r.Data)
	}
	if err != nil || b.T != msgBanner {
		return fmt.Errorf("connect to the run's holder: it sent no banner (%v)", err)
	}
	if b.Run != run {
		return fmt.Errorf("connect to the run's holder: it holds run %q, not %q", b.Run, run)
	}
	hr := Range{Min: b.Min, Max: b.Max}
	v, ok := Negotiate(Versions(), hr)
	if !ok {
		return &VersionError{Holder: hr, Flyd: Versions()}
	}
	c.version, c.holder = v, b.PID
	if err := c.write(controlRecord(message{T: msgHello, V: v, After: after})); err != nil {
		return fmt.Errorf("connect to the run's holder: %w", err)
	}
	_ = c.c.SetDeadline(time.Time{})
	return nil
}

// Version is the protocol version the connection speaks.
func (c *Conn) Version() int { return c.version }

// Message is what Next reads: a record of the spool (Type stdout, stderr
// or exit), or what the holder says of its spool (Spool), or a ping.
type Message struct {
	Record
	Spool *SpoolNotice // the spool is full (Full), or has room again
	Ping  bool
}

// SpoolNotice is the holder's word on its spool.
type SpoolNotice struct {
	Full bool
	Err  string // why it is full
}

// Next reads the next message. The record's Data is valid until the next
// call. A holder silent for idleTimeout is taken for hung: Next fails.
func (c *Conn) Next() (Message, error) {
	for {
		// The deadline moves at most once a second (it costs a timer's
		// update, and a flood is a record a microsecond): idleTimeout
		// less that second still takes a hung holder for hung.
		if now := time.Now(); now.Sub(c.armed) >= time.Second {
			_ = c.c.SetReadDeadline(now.Add(idleTimeout))
			c.armed = now
		}
		r, err := c.d.next()
		if err != nil {
			c.Close()
			return Message{}, err
		}
		if spoolType(r.Type) {
			return Message{Record: r}, nil
		}
		if r.Type != typeControl {
			c.Close()
			return Message{}, fmt.Errorf("the run's holder sent a record of type %d", r.Type)
		}
		m, err := parseControl(r.Data)
		if err != nil {
			c.Close()
			return Message{}, err
		}
		switch m.T {
		case msgReply:
			c.mu.Lock()
			ch := c.waiting[m.ID]
			delete(c.waiting, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m.Err
			}
		case msgPing:
			return Message{Ping: true}, nil
		case msgSpool:
			return Message{Spool: &SpoolNotice{Full: m.Full, Err: m.Err}}, nil
		}
	}
}

// Buffered reports whether Next has a spool record (not a control
// message) ready without reading.
func (c *Conn) Buffered() bool { return c.d.buffered() }

// write writes whole records within writeTimeout.
func (c *Conn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closed:
		return net.ErrClosed
	default:
	}
	_ = c.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.c.Write(b); err != nil {
		c.Close()
		return fmt.Errorf("write to the run's holder: %w", err)
	}
	return nil
}

// Ack tells the holder that every record up to seq is committed.
func (c *Conn) Ack(seq uint64) error { return c.write(controlRecord(message{T: msgAck, Seq: seq})) }

// Stdin sends b to the child's stdin.
func (c *Conn) Stdin(b []byte) error {
	if len(b) > MaxPayload {
		return fmt.Errorf("a write of %d bytes to the run's stdin (at most %d)", len(b), MaxPayload)
	}
	return c.write(AppendRecord(nil, Record{Type: typeStdin, Data: b}))
}

// SetVM tells the holder the app's VM service, for its state file.
func (c *Conn) SetVM(uri string) error { return c.write(controlRecord(message{T: msgMeta, VM: uri})) }

// Signal asks the holder to send sig to the run's group, what left it
// and (for a kill) what it orphaned, and waits for its answer (the
// connection's reader must be reading, in Next).
func (c *Conn) Signal(ctx context.Context, sig proc.Signal) error {
	name := sigTerm
	if sig == proc.Kill {
		name = sigKill
	}
	ch := make(chan string, 1)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.waiting[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
	}()
	if err := c.write(controlRecord(message{T: msgSignal, ID: id, Sig: name})); err != nil {
		return err
	}
	t := time.NewTimer(writeTimeout)
	defer t.Stop()
	select {
	case e := <-ch:
		if e != "" {
			return fmt.Errorf("the run's holder: %s", e)
		}
		return nil
	case <-c.closed:
		return net.ErrClosed
	case <-t.C:
		return errors.New("the run's holder did not answer a signal in time")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the connection; the holder goes on.
func (c *Conn) Close() {
	c.once.Do(func() {
		close(c.closed)
		c.c.Close()
	})
}

// Closed is closed once the connection is.
func (c *Conn) Closed() <-chan struct{} { return c.closed }
