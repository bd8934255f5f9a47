package holder

import (
	"bytes"
	"net"
	"os"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/ipc"
	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/proc"
)

// The holder's side of the control connection: accepting flyd's
// connections, the handshake, flyd's requests, and sending it the spool's
// records.

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
