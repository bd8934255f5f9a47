package ipc

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wine"
	"golang.org/x/sys/windows"
)

// makePipe makes an instance of the pipe name with the security
// descriptor sddl, as another program could: first if first.
func makePipe(name, sddl string, first bool) (windows.Handle, error) {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return 0, err
	}
	sa := &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return 0, err
	}
	flags := uint32(windows.PIPE_ACCESS_DUPLEX | windows.FILE_FLAG_OVERLAPPED)
	if first {
		flags |= windows.FILE_FLAG_FIRST_PIPE_INSTANCE
	}
	return windows.CreateNamedPipe(p, flags, windows.PIPE_TYPE_BYTE, windows.PIPE_UNLIMITED_INSTANCES, 4096, 4096, 0, sa)
}

// dialOwn listens on a new pipe and dials it, until the test ends.
func dialOwn(t *testing.T) *pipeConn {
	t.Helper()
	name := endpoint(t)
	ln, err := Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c, err := Dial(context.Background(), name)
	if err != nil {
		t.Fatalf("Dial(this user's pipe) = %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*pipeConn)
}

// The pipe Listen makes is this user's: a dial reads that owner through
// the handle it opened.
func TestPipeOwnedByUser(t *testing.T) {
	sd, err := windows.GetSecurityInfo(dialOwn(t).h, windows.SE_KERNEL_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		t.Fatal(err)
	}
	if o, _, err := sd.Owner(); err != nil || o == nil || owner.SID(o.String()) != owner.Current() {
		t.Errorf("the owner of Listen's pipe = %v, %v; want this user, %s", o, err, owner.Current())
	}
}

// The pipe Listen makes grants this user alone: its access list is
// protected from inheritance, denies network logons and allows no one
// but the user. Wine keeps what the security descriptor says, though it
// does not enforce it; only real Windows enforces it.
func TestPipeDACL(t *testing.T) {
	sd, err := windows.GetSecurityInfo(dialOwn(t).h, windows.SE_KERNEL_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		t.Fatal(err)
	}
	control, _, err := sd.Control()
	if err != nil {
		t.Fatal(err)
	}
	if control&windows.SE_DACL_PROTECTED == 0 {
		t.Errorf("the pipe's access list is not protected: %s", sd)
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		t.Fatalf("the pipe has no access list (%v): anyone may open it", err)
	}
	deniesNetwork, allowsUser := false, false
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			t.Fatal(err)
		}
		sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart)).String()
		switch ace.Header.AceType {
		case windows.ACCESS_DENIED_ACE_TYPE:
			deniesNetwork = deniesNetwork || sid == "S-1-5-2"
		case windows.ACCESS_ALLOWED_ACE_TYPE:
			if owner.SID(sid) != owner.Current() {
				t.Errorf("the pipe's access list allows %s too: %s", sid, sd)
			}
			allowsUser = true
		default:
			t.Errorf("the pipe's access list has an entry of type %d: %s", ace.Header.AceType, sd)
		}
	}
	if !deniesNetwork || !allowsUser {
		t.Errorf("the pipe's access list = %s; want network logons denied and this user (%s) allowed", sd, owner.Current())
	}
}

// A pipe another user made under flyd's name is refused before anything
// is sent, whatever process now serves it: its owner is not this user.
func TestDialRefusesPipeOfAnotherOwner(t *testing.T) {
	wine.SkipUnder(t, "Wine makes every pipe's owner its maker's user, whatever its security descriptor says")
	name := endpoint(t)
	// The Administrators group stands in for another user: a process may
	// make it an owner only when elevated, and no process of another
	// user's can make this user one.
	h, err := makePipe(name, "O:BAD:(A;;GA;;;WD)", true)
	if errors.Is(err, windows.ERROR_INVALID_OWNER) {
		t.Skip("not elevated: this process cannot make a pipe that another SID owns")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(h)
	c, err := Dial(context.Background(), name)
	if err == nil {
		c.Close()
		t.Fatal("Dial(a pipe the Administrators group owns) succeeded")
	}
	if !errors.Is(err, paths.ErrUntrusted) || !strings.Contains(err.Error(), "S-1-5-32-544") {
		t.Errorf("Dial(a pipe the Administrators group owns) = %v; want ErrUntrusted naming its owner", err)
	}
}

// failingCreate makes l's CreateNamedPipe fail with errno while fail
// says so, counting the failures.
type failingCreate struct {
	mu     sync.Mutex
	fail   int // how many more calls fail
	failed int
	errno  windows.Errno
	create func(*uint16, uint32, uint32, uint32, uint32, uint32, uint32, *windows.SecurityAttributes) (windows.Handle, error)
}

func (f *failingCreate) set(n int) {
	f.mu.Lock()
	f.fail = n
	f.mu.Unlock()
}

func (f *failingCreate) call(name *uint16, flags, mode, max, out, in, timeout uint32, sa *windows.SecurityAttributes) (windows.Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		f.failed++
		return 0, f.errno
	}
	return f.create(name, flags, mode, max, out, in, timeout, sa)
}

func listenFailing(t *testing.T, name string, errno windows.Errno) (*pipeListener, *failingCreate) {
	t.Helper()
	ln, err := Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	l := ln.(*pipeListener)
	f := &failingCreate{errno: errno, create: l.create}
	l.create = f.call
	return l, f
}

// A spare instance that cannot be made for a moment (the system is short
// of resources) is a temporary Accept error: http.Server pauses and goes
// on serving rather than stop, and clients are served again once it can.
func TestAcceptTemporaryError(t *testing.T) {
	name := endpoint(t)
	l, f := listenFailing(t, name, windows.ERROR_NO_SYSTEM_RESOURCES)
	defer l.Close()

	// An Accept whose next spare cannot be made returns the connection;
	// the Accept after it has no spare to wait on, and says why.
	f.set(2)
	accepted := make(chan error, 1)
	go func() { // owned by the test: ends with a connection, or an error
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	// The client stays until it is accepted: one that left before would
	// be dropped, as it should, and Accept would wait for the next.
	c, err := Dial(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	err = <-accepted
	c.Close()
	if err != nil {
		t.Fatalf("Accept (its next spare failing) = %v, want the connection", err)
	}
	_, err = l.Accept()
	var ne net.Error
	//lint:ignore SA1019 http.Server retries an Accept error that says it is Temporary
	if !errors.As(err, &ne) || !ne.Temporary() || !errors.Is(err, windows.ERROR_NO_SYSTEM_RESOURCES) {
		t.Fatalf("Accept (no spare can be made) = %#v; want a temporary net.Error wrapping the cause", err)
	}

	// http.Server retries a temporary error: it serves once the spare
	// can be made.
	f.set(3)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }() // owned by the test: ended by hs.Close below
	defer hs.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return Dial(ctx, name) }}}
	deadline := time.Now().Add(time.Minute) // a hang detector
	for {
		resp, err := client.Get("http://flyd/")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case err := <-served:
			t.Fatalf("Serve returned %v while the spare could not be made", err)
		default:
		}
		if !NoListener(err) {
			t.Fatalf("GET = %v, want it served, or no pipe yet", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not served a minute after the spare could be made again: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // no instance sends the client no event: the interval of dialling
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed != 5 {
		t.Errorf("%d CreateNamedPipe calls failed, want 5: the test did not test the retry", f.failed)
	}
}

// An instance that keeps failing to connect a client does not spin:
// Accept waits longer after each failure, and Close ends the wait.
func TestAcceptPausesWhenConnectsFail(t *testing.T) {
	name := endpoint(t)
	ln, err := Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	l := ln.(*pipeListener)
	// Every instance from now on is no pipe (an event): connecting it
	// fails at once, every time.
	var mu sync.Mutex
	var times []time.Time
	enough := make(chan struct{})
	l.create = func(*uint16, uint32, uint32, uint32, uint32, uint32, uint32, *windows.SecurityAttributes) (windows.Handle, error) {
		mu.Lock()
		defer mu.Unlock()
		if times = append(times, time.Now()); len(times) == 6 {
			close(enough)
		}
		return windows.CreateEvent(nil, 1, 0, nil)
	}
	l.drop(l.spare)
	l.spare = 0
	accepted := make(chan error, 1)
	go func() { // owned by the test: ends once Close below ends Accept
		_, err := l.Accept()
		accepted <- err
	}()
	select {
	case <-enough:
	case <-time.After(time.Minute): // a hang detector
		t.Fatal("Accept made no new instances after failed connects")
	}
	l.Close()
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The fifth failure in a row waits pauseAfter(5) (40 ms): a loop
	// that spun would have made thousands of instances by then.
	if gap := times[5].Sub(times[4]); gap < pauseAfter(5)/2 {
		t.Errorf("the sixth instance came %v after the fifth, want about %v", gap, pauseAfter(5))
	}
}

// Accept's pauses grow from nothing (a client that left before it was
// accepted) to a second, and no further.
func TestPauseAfter(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 0}, {2, 5 * time.Millisecond}, {3, 10 * time.Millisecond}, {5, 40 * time.Millisecond},
		{9, 640 * time.Millisecond}, {10, time.Second}, {1000, time.Second}} {
		if got := pauseAfter(tc.n); got != tc.want {
			t.Errorf("pauseAfter(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// Once none of the listener's instances is open, the name is free, and
// another program may make a pipe of it: the listener's next instance
// is made as the first, and fails, rather than join that pipe.
func TestNoInstanceJoinsAnotherPipe(t *testing.T) {
	wine.SkipUnder(t, "Wine does not enforce FILE_FLAG_FIRST_PIPE_INSTANCE")
	name := endpoint(t)
	l, f := listenFailing(t, name, windows.ERROR_NO_SYSTEM_RESOURCES)
	defer l.Close()
	f.set(1) // the spare after the first connection
	accepted := make(chan net.Conn, 1)
	go func() { // owned by the test: ends with the connection
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err := Dial(context.Background(), name) // it stays until accepted: see TestAcceptTemporaryError
	if err != nil {
		t.Fatal(err)
	}
	c := <-accepted
	client.Close()
	if c != nil {
		c.Close() // the listener's last instance: the name is free
	}
	// Another program takes the name, with an access list that would let
	// the listener join it.
	h, err := makePipe(name, "D:(A;;GA;;;WD)", true)
	if err != nil {
		t.Fatalf("make a pipe of the free name: %v", err)
	}
	defer windows.CloseHandle(h)
	done := make(chan error, 1)
	go func() { // owned by the test: ends with an error, or by Close below
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		var ne net.Error
		//lint:ignore SA1019 http.Server retries an Accept error that says it is Temporary
		if !errors.Is(err, ErrInUse) || !errors.As(err, &ne) || !ne.Temporary() {
			t.Errorf("Accept (the name another pipe's) = %v; want a temporary ErrInUse", err)
		}
	case <-time.After(10 * time.Second):
		l.Close()
		<-done
		t.Fatal("Accept joined the other program's pipe and waited for its clients")
	}
}

// connected, Accept's look at an instance whose pending connect has not
// said so (Wine), sees a client that is there, and one that came and is
// gone already (the instance is broken, never to take another client: a
// connection whose reads end at once), but not an instance nobody came to.
func TestConnected(t *testing.T) {
	name := endpoint(t)
	ln, err := Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h := ln.(*pipeListener).spare
	if connected(h) {
		t.Error("connected(an instance no client came to) = true")
	}
	c, err := Dial(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if !connected(h) {
		t.Error("connected(an instance with its client) = false")
	}
	c.Close()
	if !connected(h) {
		t.Error("connected(an instance whose client came and left) = false: Accept would wait on it for ever")
	}
}
