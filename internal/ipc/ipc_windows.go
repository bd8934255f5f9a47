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
// fly's Windows tests run). Each instance has an access list that grants
// this user alone and denies network logons, rejects remote clients, and
// the first is made with FILE_FLAG_FIRST_PIPE_INSTANCE, so that no other
// process can hold the name while flyd listens on it. One spare instance
// always waits for the next client. Handles are overlapped, so the
// runtime's poller serves reads, writes and deadlines.

// ErrInUse is Listen's error when another process already holds the pipe
// name: another flyd, or a program squatting on it.
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

// securityAttributes grants the user alone, and denies network logons.
func securityAttributes() (*windows.SecurityAttributes, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("read this process's user: %w", err)
	}
	sd, err := windows.SecurityDescriptorFromString("D:P(D;;GA;;;NU)(A;;GA;;;" + tu.User.Sid.String() + ")")
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

	acceptMu sync.Mutex         // held by Accept; Close takes it to free the spare
	ov       windows.Overlapped // Accept's pending connect: on the heap, where the kernel may write to it
	event    windows.Handle     // ov's event

	mu       sync.Mutex
	spare    windows.Handle // the instance waiting for the next client; 0 if none yet
	isClosed bool
}

func (l *pipeListener) instance(first bool) (windows.Handle, error) {
	name, err := windows.UTF16PtrFromString(l.name)
	if err != nil {
		return 0, err
	}
	flags := uint32(windows.PIPE_ACCESS_DUPLEX | windows.FILE_FLAG_OVERLAPPED)
	if first {
		flags |= windows.FILE_FLAG_FIRST_PIPE_INSTANCE
	}
	mode := uint32(windows.PIPE_TYPE_BYTE | windows.PIPE_READMODE_BYTE | windows.PIPE_WAIT | windows.PIPE_REJECT_REMOTE_CLIENTS)
	h, err := windows.CreateNamedPipe(name, flags, mode, windows.PIPE_UNLIMITED_INSTANCES, pipeBuffer, pipeBuffer, 0, l.sa)
	if err != nil {
		if first && (errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_PIPE_BUSY)) {
			return 0, fmt.Errorf("listen on %s: %w", l.name, ErrInUse)
		}
		return 0, fmt.Errorf("listen on %s: %w", l.name, err)
	}
	return h, nil
}

func listen(name string) (net.Listener, error) {
	sa, err := securityAttributes()
	if err != nil {
		return nil, err
	}
	l := &pipeListener{name: name, sa: sa}
	if l.spare, err = l.instance(true); err != nil {
		return nil, err
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
// and returns the connection.
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
			if h, err = l.instance(false); err != nil {
				return nil, err
			}
			l.mu.Lock()
			l.spare = h
			l.mu.Unlock()
		}
		switch err := l.connect(h); {
		case errors.Is(err, net.ErrClosed):
			return nil, err
		case err != nil:
			// The client left before it was accepted: this instance
			// waits for the next one.
			_ = windows.DisconnectNamedPipe(h)
			continue
		}
		l.mu.Lock()
		l.spare = 0 // the next Accept makes a new spare
		l.mu.Unlock()
		next, err := l.instance(false)
		l.mu.Lock()
		if err == nil && !l.isClosed {
			l.spare = next
		} else if err == nil {
			windows.CloseHandle(next)
		}
		l.mu.Unlock()
		return &pipeConn{File: os.NewFile(uintptr(h), l.name), h: h, name: pipeAddr(l.name)}, nil
	}
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
	which, err := windows.WaitForMultipleObjects([]windows.Handle{l.event, l.closed}, false, windows.INFINITE)
	var n uint32
	if err != nil || which != windows.WAIT_OBJECT_0 {
		// Closed: cancel the connect and wait for the cancel, so the
		// kernel is done with l.ov.
		_ = windows.CancelIoEx(h, &l.ov)
		_ = windows.GetOverlappedResult(h, &l.ov, &n, true)
		return net.ErrClosed
	}
	return windows.GetOverlappedResult(h, &l.ov, &n, false)
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
	for _, h := range []windows.Handle{l.spare, l.event, l.closed} {
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

// checkServer refuses a pipe whose server process is not this user's:
// nothing (the editor's environment, its workspace) is sent to a pipe
// that another user made under flyd's name.
func checkServer(h windows.Handle, name string) error {
	var pid uint32
	if err := windows.GetNamedPipeServerProcessId(h, &pid); err != nil {
		return fmt.Errorf("%w: who serves the pipe %s: %v", paths.ErrUntrusted, name, err)
	}
	u, err := owner.ProcessUser(int(pid))
	if err != nil {
		return fmt.Errorf("%w: who serves the pipe %s: %v", paths.ErrUntrusted, name, err)
	}
	if me := owner.Current(); u != me {
		return fmt.Errorf("%w: the pipe %s is served by %s (pid %d), not by you (%s): another user may be posing as flyd", paths.ErrUntrusted, name, u, pid, me)
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
