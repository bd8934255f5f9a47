package fakeflutter

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds the in-process `flutter run --machine` that the run tests drive.

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// session is one in-process `flutter run --machine`.
type session struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan string
	stderr *syncBuffer
	code   chan int
	seen   []string // every stdout line read so far
	exited bool
}

// startRun starts Main("run --machine" args...) with pipes. The cleanup
// shuts the app down if the test did not, and waits for every goroutine.
func startRun(t *testing.T, vars map[string]string, args ...string) *session {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, lines: make(chan string, 1<<17), stderr: &syncBuffer{}, code: make(chan int, 1)}
	kill := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.code <- mainKillable(kill, append([]string{"run", "--machine"}, args...), getenv(vars), inR, outW, s.stderr)
		outW.Close()
	}()
	go func() {
		defer wg.Done()
		defer close(s.lines)
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				s.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if !s.exited {
			close(kill) // neither stdin EOF nor daemon.shutdown stops an app
			go func() {
				for range s.lines {
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("fake flutter did not exit")
		}
		inW.Close()
	})
	return s
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("write request: %v", err)
	}
}

// next returns the next stdout line that satisfies match.
func (s *session) next(what string, match func(string) bool) string {
	s.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("stdout ended waiting for %s; stderr:\n%s", what, s.stderr)
			}
			s.seen = append(s.seen, line)
			if match(line) {
				return line
			}
		case <-timeout:
			s.t.Fatalf("timed out waiting for %s; seen:\n%s", what, strings.Join(s.seen, "\n"))
		}
	}
}

func (s *session) event(name string) msg {
	s.t.Helper()
	line := s.next("event "+name, func(l string) bool { m, ok := decode(l); return ok && m.Event == name })
	m, _ := decode(line)
	return m
}

func (s *session) reply(id string) msg {
	s.t.Helper()
	line := s.next("reply "+id, func(l string) bool { m, ok := decode(l); return ok && m.Event == "" && string(m.ID) == id })
	m, _ := decode(line)
	return m
}

// wait returns Main's exit code and the rest of stdout.
func (s *session) wait() (int, []string) {
	s.t.Helper()
	var rest []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.exited = true
				return <-s.code, rest
			}
			s.seen = append(s.seen, line)
			rest = append(rest, line)
		case <-timeout:
			s.t.Fatalf("fake flutter did not exit; seen:\n%s", strings.Join(s.seen, "\n"))
		}
	}
}

func isEvent(name string) func(string) bool {
	return func(l string) bool { m, ok := decode(l); return ok && m.Event == name }
}
