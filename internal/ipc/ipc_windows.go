package ipc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/paths"
	"golang.org/x/sys/windows"
)

// On Windows the endpoint is a named pipe made directly on
// golang.org/x/sys/windows (go-winio's listener hangs under Wine, where
// fly's Windows tests run). The pipe is owned by this user (an explicit
// owner in its security descriptor, whatever the token's default owner,
// which is the Administrators group for an elevated process), its access
// list grants this user alone and denies network logons, it rejects
// remote clients, and an instance made while the listener has none open
// is made with FILE_FLAG_FIRST_PIPE_INSTANCE, so that no other process
// can hold the name while flyd listens on it, nor slip in between. One
// spare instance always waits for the next client. Handles are
// overlapped, so the runtime's poller serves reads, writes and
// deadlines.
//
// A dial trusts the pipe by its owner (see checkServer), which other
// users cannot forge, not by its server's process id, which names
// whatever process has that pid later.

// ErrInUse is Listen's error when another process already holds the pipe
// name: another flyd, or a program squatting on it. (Accept's, wrapped
// in a temporary error, when it is so once none of the listener's
// instances is open.)
var ErrInUse = errors.New("the pipe name is held by another process")

const pipeBuffer = 64 << 10

// pipeAddr is a pipe's name as a net.Addr.
type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

// pipeConn is one connected pipe instance.
type pipeConn struct {
	*os.File
	h    windows.Handle // the File's, valid while it is open
	name pipeAddr

	l      *pipeListener // the listener that accepted it; nil for a dialled one
	forget sync.Once     // l.forget, once
}

// Close closes the connection; one a listener accepted is no longer
// counted as its instance first (see pipeListener.live).
func (c *pipeConn) Close() error {
	if c.l != nil {
		c.forget.Do(c.l.forget)
	}
	return c.File.Close()
}

func (c *pipeConn) LocalAddr() net.Addr  { return c.name }
func (c *pipeConn) RemoteAddr() net.Addr { return c.name }

func (c *pipeConn) Read(b []byte) (int, error) {
	n, err := c.File.Read(b)
	return n, c.opError("read", err)
}

func (c *pipeConn) Write(b []byte) (int, error) {
	n, err := c.File.Write(b)
	return n, c.opError("write", err)
}

// opError makes a failed read or write a *net.OpError, as a network
// connection's is, where the File's is a *fs.PathError: net/http tells
// the deadline it sets to stop its background read from a dead
// connection only by a net.Error that times out, and cancels every
// later request's context on a keep-alive connection otherwise. io.EOF
// stays itself.
func (c *pipeConn) opError(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if pe, ok := err.(*fs.PathError); ok {
		err = pe.Err
	}
	if errors.Is(err, os.ErrClosed) {
		err = net.ErrClosed
	}
	return &net.OpError{Op: op, Net: "pipe", Source: c.name, Addr: c.name, Err: err}
}

// securityAttributes make the pipe this user's (its owner) and grant
// the user alone, denying network logons.
func securityAttributes() (*windows.SecurityAttributes, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("read this process's user: %w", err)
	}
	sid := tu.User.Sid.String()
	sd, err := windows.SecurityDescriptorFromString("O:" + sid + "D:P(D;;GA;;;NU)(A;;GA;;;" + sid + ")")
	if err != nil {
		return nil, fmt.Errorf("make the pipe's access list: %w", err)
	}
	return &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}, nil
}

// pipeListener accepts clients on a named pipe, one Accept at a time.
type pipeListener struct {
	name   string
	sa     *windows.SecurityAttributes
	closed windows.Handle // a manual-reset event, set by Close

	// create is windows.CreateNamedPipe; tests make it fail.
	create func(name *uint16, flags, pipeMode, maxInstances, outSize, inSize, defaultTimeout uint32, sa *windows.SecurityAttributes) (windows.Handle, error)

	acceptMu sync.Mutex         // held by Accept; Close takes it to free the spare
	ov       windows.Overlapped // Accept's pending connect: on the heap, where the kernel may write to it
	event    windows.Handle     // ov's event
	failures int                // connects failed in a row, for pause

	mu       sync.Mutex
	spare    windows.Handle // the instance waiting for the next client; 0 if none yet
	isClosed bool
	// live counts this listener's instances that may be open: the spare
	// and the accepted connections. A handle leaves the count before it
	// closes, and instance holds mu from reading it to making the
	// instance: while live > 0, an instance of this pipe is open, so the
	// name is this pipe's, and the next instance joins it.
	live int
}

// Errors of CreateNamedPipe that pass: the system is short of memory or
// handles for a moment, or the name is held by another process for now
// (when the listener had no instance open: see instance).
var transient = []error{ErrInUse, windows.ERROR_PIPE_BUSY, windows.ERROR_NO_SYSTEM_RESOURCES, windows.ERROR_NOT_ENOUGH_MEMORY,
	windows.ERROR_OUTOFMEMORY, windows.ERROR_NOT_ENOUGH_QUOTA, windows.ERROR_COMMITMENT_LIMIT, windows.ERROR_TOO_MANY_OPEN_FILES}

// temporary is an error Accept returns that a caller retries after a
// pause, as http.Server.Serve does for a net.Error whose Temporary is
// true (rather than stop serving).
type temporary struct{ err error }

func (e temporary) Error() string   { return e.err.Error() }
func (e temporary) Unwrap() error   { return e.err }
func (e temporary) Timeout() bool   { return false }
func (e temporary) Temporary() bool { return true }

// acceptError is what Accept returns when it cannot make an instance
// (err): a *net.OpError, temporary if err is transient.
func (l *pipeListener) acceptError(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return err
	}
	err = fmt.Errorf("make an instance of the pipe: %w", err)
	for _, t := range transient {
		if errors.Is(err, t) {
			err = temporary{err}
			break
		}
	}
	return &net.OpError{Op: "accept", Net: "pipe", Addr: pipeAddr(l.name), Err: err}
}

// instance makes an instance of the pipe: the first one
// (FILE_FLAG_FIRST_PIPE_INSTANCE) when the listener has none open, which
// fails if any other process holds the name. Made without the flag then,
// it could join a pipe another process made under the name since the
// listener's last instance closed.
func (l *pipeListener) instance() (windows.Handle, error) {
	name, err := windows.UTF16PtrFromString(l.name)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.isClosed {
		return 0, net.ErrClosed
	}
	first := l.live == 0
	flags := uint32(windows.PIPE_ACCESS_DUPLEX | windows.FILE_FLAG_OVERLAPPED)
	if first {
		flags |= windows.FILE_FLAG_FIRST_PIPE_INSTANCE
	}
	mode := uint32(windows.PIPE_TYPE_BYTE | windows.PIPE_READMODE_BYTE | windows.PIPE_WAIT | windows.PIPE_REJECT_REMOTE_CLIENTS)
	h, err := l.create(name, flags, mode, windows.PIPE_UNLIMITED_INSTANCES, pipeBuffer, pipeBuffer, 0, l.sa)
	if err != nil {
		if first && (errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_PIPE_BUSY)) {
			return 0, ErrInUse
		}
		return 0, err
	}
	l.live++
	return h, nil
}

// forget takes an instance out of live: just before its handle closes.
func (l *pipeListener) forget() {
	l.mu.Lock()
	l.live--
	l.mu.Unlock()
}

// drop closes the instance h, which is not a connection's.
func (l *pipeListener) drop(h windows.Handle) {
	l.forget()
	windows.CloseHandle(h)
}

func listen(name string) (net.Listener, error) {
	sa, err := securityAttributes()
	if err != nil {
		return nil, err
	}
	l := &pipeListener{name: name, sa: sa, create: windows.CreateNamedPipe}
	if l.spare, err = l.instance(); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", name, err)
	}
	if l.closed, err = windows.CreateEvent(nil, 1, 0, nil); err == nil {
		l.event, err = windows.CreateEvent(nil, 1, 0, nil)
	}
	if err != nil {
		l.free()
		return nil, fmt.Errorf("listen on %s: %w", name, err)
	}
	l.ov.HEvent = l.event
	return l, nil
}

// Accept waits for a client on the spare instance, makes the next spare
// and returns the connection. When no spare can be made, the error is
// temporary if the cause passes (a net.Error: http.Server.Serve pauses
// and calls Accept again).
func (l *pipeListener) Accept() (net.Conn, error) {
	l.acceptMu.Lock()
	defer l.acceptMu.Unlock()
	for {
		l.mu.Lock()
		h, closed := l.spare, l.isClosed
		l.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		if h == 0 {
			var err error
			if h, err = l.instance(); err != nil {
				return nil, l.acceptError(err)
			}
			l.mu.Lock()
			l.spare = h
			l.mu.Unlock()
		}
		if err := l.connect(h); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			// The client left before it was accepted: this instance
			// waits for the next one, or, if it cannot be reset, a new
			// one does. Failing again and again, it waits longer each
			// time (pause).
			if err := l.pause(); err != nil {
				return nil, err
			}
			if windows.DisconnectNamedPipe(h) != nil {
				l.mu.Lock()
				l.spare = 0
				l.mu.Unlock()
				l.drop(h)
			}
			continue
		}
		l.failures = 0
		l.mu.Lock()
		l.spare = 0 // the connection's now
		l.mu.Unlock()
		c := &pipeConn{File: os.NewFile(uintptr(h), l.name), h: h, name: pipeAddr(l.name), l: l}
		// The next spare, made while c's instance keeps the name this
		// pipe's. If it cannot be made, the next Accept tries again.
		if next, err := l.instance(); err == nil {
			l.mu.Lock()
			l.spare = next // Close, waiting for this Accept, frees it
			l.mu.Unlock()
		}
		return c, nil
	}
}

// Pauses between failed connects: none after the first failure (a
// client that left before it was accepted), then from minPause doubling
// to maxPause while connects keep failing.
const (
	minPause = 5 * time.Millisecond
	maxPause = time.Second
)

// pauseAfter is how long Accept waits after the nth failed connect in a
// row.
func pauseAfter(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := minPause
	for i := 2; i < n && d < maxPause; i++ {
		d *= 2
	}
	return min(d, maxPause)
}

// pause counts a failed connect and waits as long as pauseAfter says,
// or until Close.
func (l *pipeListener) pause() error {
	l.failures++
	d := pauseAfter(l.failures)
	if d == 0 {
		return nil
	}
	if ev, err := windows.WaitForSingleObject(l.closed, uint32(d/time.Millisecond)); err == nil && ev == windows.WAIT_OBJECT_0 {
		return net.ErrClosed
	}
	return nil
}

// connect waits until a client connects to h, or Close.
func (l *pipeListener) connect(h windows.Handle) error {
	_ = windows.ResetEvent(l.event)
	switch err := windows.ConnectNamedPipe(h, &l.ov); {
	case err == nil, errors.Is(err, windows.ERROR_PIPE_CONNECTED):
		return nil
	case !errors.Is(err, windows.ERROR_IO_PENDING):
		return err
	}
	var n uint32
	for {
		which, err := windows.WaitForMultipleObjects([]windows.Handle{l.event, l.closed}, false, connectPoll)
		switch {
		case err == nil && which == windows.WAIT_OBJECT_0:
			return windows.GetOverlappedResult(h, &l.ov, &n, false)
		case err == nil && which == uint32(windows.WAIT_TIMEOUT) && !connected(h):
			continue
		}
		// Closed, or connected without the pending connect completing (Wine
		// can leave it pending when a client came just before it was
		// issued): cancel it and wait for the cancel, so the kernel is done
		// with l.ov.
		_ = windows.CancelIoEx(h, &l.ov)
		_ = windows.GetOverlappedResult(h, &l.ov, &n, true)
		if err == nil && which == uint32(windows.WAIT_TIMEOUT) {
			return nil
		}
		return net.ErrClosed
	}
}

// connectPoll is how often connect looks whether a client is there when
// the pending connect has not said so.
const connectPoll = 250 // ms

// procPeekNamedPipe is kernel32's PeekNamedPipe, which x/sys does not
// wrap.
var procPeekNamedPipe = windows.NewLazySystemDLL("kernel32.dll").NewProc("PeekNamedPipe")

// connected reports whether a client has connected to h: it holds the
// other end (a peek succeeds), or it held it and is gone already (the
// peek finds the pipe broken: a connection whose reads end at once, as
// Windows gives one). A peek fails otherwise on an instance nobody has
// connected to yet. Taking only the first for a connection left a client
// that came and went between two looks unseen, and Accept waiting on it
// for ever.
func connected(h windows.Handle) bool {
	var avail uint32
	r, _, err := procPeekNamedPipe.Call(uintptr(h), 0, 0, 0, uintptr(unsafe.Pointer(&avail)), 0)
	return r != 0 || errors.Is(err, windows.ERROR_BROKEN_PIPE)
}

// Close stops Accept and frees the spare instance. Connections already
// accepted stay open: they are their owners' to close.
func (l *pipeListener) Close() error {
	l.mu.Lock()
	if l.isClosed {
		l.mu.Unlock()
		return nil
	}
	l.isClosed = true
	l.mu.Unlock()
	_ = windows.SetEvent(l.closed)
	l.acceptMu.Lock() // Accept has returned
	defer l.acceptMu.Unlock()
	l.free()
	return nil
}

func (l *pipeListener) free() {
	if l.spare != 0 {
		l.drop(l.spare)
	}
	for _, h := range []windows.Handle{l.event, l.closed} {
		if h != 0 {
			windows.CloseHandle(h)
		}
	}
	l.spare, l.event, l.closed = 0, 0, 0
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.name) }

// busyRetry is how often a dial tries again while every instance of the
// pipe is busy: the listener makes a new one as it accepts.
const busyRetry = 5 * time.Millisecond

func dial(ctx context.Context, name string) (net.Conn, error) {
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	var h windows.Handle
	for {
		// SECURITY_IDENTIFICATION: the server may learn who we are, never
		// act as us.
		h, err = windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil, windows.OPEN_EXISTING,
			windows.FILE_FLAG_OVERLAPPED|windows.SECURITY_SQOS_PRESENT|windows.SECURITY_IDENTIFICATION, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, windows.ERROR_PIPE_BUSY) {
			return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(name), Err: os.NewSyscallError("CreateFile", err)}
		}
		t := time.NewTimer(busyRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(name), Err: ctx.Err()}
		case <-t.C:
		}
	}
	if err := checkServer(h, name); err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	return &pipeConn{File: os.NewFile(uintptr(h), name), h: h, name: pipeAddr(name)}, nil
}

// checkServer refuses a pipe that is not this user's, before anything
// (the editor's environment, its workspace) is sent on it: one that
// another user made under flyd's name while flyd was not running.
//
// The pipe is judged by its owner, read through h, the handle this dial
// opened (so it is the pipe connected to, not a name looked up again).
// What Windows guarantees here: a pipe's security descriptor is its
// name's, set by whoever made its first instance and kept until its last
// one closes; every later instance shares it, and only a caller that its
// access list grants FILE_CREATE_PIPE_INSTANCE may make one (flyd's
// grants this user alone). An owner, given at creation or set later, can
// only be the caller's own user, or a group its token may own, unless
// the caller holds SeRestorePrivilege or SeTakeOwnershipPrivilege
// (administrators and the system, who are trusted as root is on Unix):
// so another user cannot make a pipe this user owns. flyd names this user
// as the owner (securityAttributes), so an elevated flyd's pipe too is
// the user's, not the Administrators group's.
//
// Not by its server's process id (GetNamedPipeServerProcessId): that is
// recorded as the instance is made and kept while its maker may have
// ended and its handle passed to another process, and the pid then
// names whatever process has it next, perhaps one of this user's.
func checkServer(h windows.Handle, name string) error {
	sd, err := windows.GetSecurityInfo(h, windows.SE_KERNEL_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("%w: who owns the pipe %s: %v", paths.ErrUntrusted, name, err)
	}
	sid, _, err := sd.Owner()
	if err != nil || sid == nil {
		return fmt.Errorf("%w: the pipe %s has no owner", paths.ErrUntrusted, name)
	}
	if o, me := owner.SID(sid.String()), owner.Current(); !me.Known() || o != me {
		var pid uint32
		_ = windows.GetNamedPipeServerProcessId(h, &pid) // for the message only
		return fmt.Errorf("%w: the pipe %s belongs to %s, not to you (%s), and is served by pid %d: another user may be posing as flyd",
			paths.ErrUntrusted, name, o, me, pid)
	}
	return nil
}

func noListener(err error) bool {
	return errors.Is(err, fs.ErrNotExist) // ERROR_FILE_NOT_FOUND: no pipe of that name
}

// peerOf asks the pipe which process the client is, and that process's
// token which user it runs as.
func peerOf(c net.Conn) (Peer, error) {
	pc, ok := c.(*pipeConn)
	if !ok {
		return Peer{}, fmt.Errorf("not a pipe connection: %T", c)
	}
	var pid uint32
	if err := windows.GetNamedPipeClientProcessId(pc.h, &pid); err != nil {
		return Peer{}, fmt.Errorf("the pipe client's process: %w", err)
	}
	u, err := owner.ProcessUser(int(pid))
	if err != nil {
		return Peer{PID: int(pid)}, err
	}
	return Peer{User: u, PID: int(pid)}, nil
}
