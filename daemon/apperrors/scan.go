package apperrors

import (
	"regexp"
	"strings"
)

// Scanner finds the errors in an app's text output: what a run prints
// where structured errors are off (web, or an app that turned them off)
// and what no VM-service event reports (an unhandled exception, an
// engine error). Feed it each app.log text in order; a block that comes
// one line per event is put together. A Scanner is not safe for
// concurrent use: it belongs to the goroutine that reads the run's output.
type Scanner struct {
	p     Project
	block []string // the lines of an "EXCEPTION CAUGHT BY" block being read
	size  int
}

// NewScanner returns a scanner for the output of an app of project p.
func NewScanner(p Project) *Scanner { return &Scanner{p: p} }

// A block longer than this is cut: its header said it was an error, and
// what came after is kept as far as it goes.
const (
	maxBlockLines = 400
	maxBlockBytes = 64 << 10
)

// engineRE is an engine log line: "[ERROR:flutter/runtime/dart_vm_initializer.cc(41)] …".
var engineRE = regexp.MustCompile(`^\[ERROR:(flutter/[^\]]*)\]\s*(.*)$`)

const unhandledMarker = "Unhandled Exception: "

// Text reads one app.log text (one line or several), isError as its
// event said and stack its stackTrace, and returns the errors it
// completes.
func (s *Scanner) Text(text string, isError bool, stack string) []Error {
	text = strings.TrimRight(text, "\n")
	if strings.Contains(text, "\n") && s.block == nil {
		if e, ok := ParseText(text, s.p); ok { // a whole block in one event
			return []Error{e}
		}
	}
	var out []Error
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		line = strings.TrimPrefix(strings.TrimRight(line, "\r"), "flutter: ")
		if s.block != nil {
			if e, ok := s.blockLine(line); ok {
				out = append(out, e)
			}
			continue
		}
		if headerRE.MatchString(line) {
			s.block = []string{line}
			s.size = len(line)
			continue
		}
		if strings.HasPrefix(line, anotherPrefix) {
			if e, ok := ParseText(line, s.p); ok {
				out = append(out, e)
			}
			continue
		}
		// The frames of an unhandled exception follow it, in the same text
		// or in stack.
		rest := strings.Join(lines[i+1:], "\n")
		if stack != "" {
			rest += "\n" + stack
		}
		if e, ok := s.line(line, isError, rest); ok {
			out = append(out, e)
			if strings.Contains(line, unhandledMarker) {
				break // what follows is its stack
			}
		}
	}
	return out
}

// blockLine adds a line to the block being read and returns the error
// when the line closes it.
func (s *Scanner) blockLine(line string) (Error, bool) {
	s.block = append(s.block, line)
	s.size += len(line) + 1
	footer := len(line) >= 10 && strings.Trim(line, "═") == ""
	if !footer && len(s.block) < maxBlockLines && s.size < maxBlockBytes {
		return Error{}, false
	}
	text := strings.Join(s.block, "\n")
	s.block, s.size = nil, 0
	return ParseText(text, s.p)
}

// line reads one line that is not part of a block: an unhandled
// exception, an engine error, or an error the event flagged. frames is
// what follows it, where its stack may be.
func (s *Scanner) line(line string, isError bool, frames string) (Error, bool) {
	var e Error
	switch m := engineRE.FindStringSubmatch(line); {
	case strings.Contains(line, unhandledMarker):
		_, msg, _ := strings.Cut(line, unhandledMarker)
		e = Error{Library: "unhandled exception", Summary: bound(strings.TrimSpace(msg), maxSummary)}
		for _, f := range strings.Split(frames, "\n") {
			f = strings.TrimSpace(strings.TrimPrefix(f, "flutter: "))
			if !strings.HasPrefix(f, "#") {
				continue
			}
			if loc := projectFrame(f, s.p); loc != "" {
				e.Frame = loc
				break
			}
		}
	case m != nil:
		e = Error{Library: "engine", Summary: bound(strings.TrimSpace(m[2]), maxSummary)}
	case isError && strings.TrimSpace(line) != "":
		e = Error{Summary: bound(strings.TrimSpace(line), maxSummary)}
	default:
		return Error{}, false
	}
	if e.Summary == "" {
		return Error{}, false
	}
	e.Text = bound(strings.TrimSpace(line+"\n"+frames), maxText)
	return e, true
}
