//go:build unix

package holder

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHolderTerminatedAlone: a holder told to end (a service stop or a
// package removal signals every process of flyd's) while no flyd is
// connected ends the run and goes, instead of waiting for a flyd that
// is not coming; it leaves the run's exit for the next one.
func TestHolderTerminatedAlone(t *testing.T) {
	t.Setenv(envLinger, "1h") // far past eventually's minute
	dir, st := startHolder(t, 10)
	endAlone(t, dir, st)
	texts, _, _ := readAll(t, dir, 0)
	if n := len(texts); n == 0 || !strings.Contains(texts[n-1], "killed by terminated") {
		t.Errorf("the spool left holds %q, want the run's exit by SIGTERM last", texts)
	}
}

// TestHolderTerminatedFullAlone: a holder told to end while its spool is
// full and no flyd is there to make room goes too, instead of waiting
// for room forever with the run's output; what the spool holds stays for
// the next flyd, and the state file says how the run ended.
func TestHolderTerminatedFullAlone(t *testing.T) {
	t.Setenv(envLinger, "1h")
	dir, st := startHolderSpec(t, 100_000, func(s *Spec) { s.SegmentBytes, s.SpoolBytes = 64<<10, 128<<10 })
	eventually(t, "the spool full", func() bool {
		s, err := ReadState(dir)
		return err == nil && s.Spool != ""
	})
	s := endAlone(t, dir, st)
	if texts, _, _ := readAll(t, dir, 0); len(texts) < 100 || s.Spool == "" {
		t.Errorf("the spool left holds %d records, and the state says %q: want what it had when it filled, and that it is full", len(texts), s.Spool)
	}
}

// TestHolderTerminatedFullConnected: told to end with its spool full while
// a flyd is connected, a holder waits for that flyd to make room and
// keeps telling it that the spool is full; it neither drops the output
// nor spins on the signal (which never let it remind flyd).
func TestHolderTerminatedFullConnected(t *testing.T) {
	t.Setenv(envLinger, "1h")
	dir, st := startHolderSpec(t, 100_000, func(s *Spec) { s.SegmentBytes, s.SpoolBytes = 64<<10, 128<<10 })
	eventually(t, "the spool full", func() bool {
		s, err := ReadState(dir)
		return err == nil && s.Spool != ""
	})
	c, err := Dial(context.Background(), st.Control, st.Run, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The holder says the spool is full first thing once it has taken the
	// connection as flyd's: told to end before that, it would rightly
	// count no flyd connected.
	for {
		m, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		if m.Spool != nil && m.Spool.Full {
			break
		}
	}
	if err := syscall.Kill(st.Holder.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	fulls := 0
	for start := time.Now(); fulls < 3; {
		if time.Since(start) > time.Minute {
			t.Fatalf("told to end with a flyd connected, the holder said the spool was full %d times in a minute; want a reminder every %v", fulls, retryFull)
		}
		m, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		if m.Spool != nil && m.Spool.Full {
			fulls++
		}
	}
	if !st.Holder.Same() {
		t.Error("the holder went with its spool full and a flyd connected")
	}
}

// endAlone sends the holder SIGTERM, waits for it to go, and returns its
// state file, which must hold the run's exit.
func endAlone(t *testing.T, dir string, st State) State {
	t.Helper()
	if err := syscall.Kill(st.Holder.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the holder told to end gone", func() bool { return !st.Holder.Same() })
	s, err := ReadState(dir)
	if err != nil || s.Exit == nil {
		t.Fatalf("the state file after the holder went = %+v, %v; want the run's exit", s, err)
	}
	return s
}
