package runs

import (
	"regexp"
	"slices"
	"strings"

	"github.com/fly-dev/fly/logring"
)

// What flutter said went wrong, as a person reads it: its compile errors
// and the lines it printed about a failure, without the --machine
// protocol's JSON or flutter_tools' own stack traces, which stay in the
// log.

// Bounds of a Problems.
const (
	maxProblemErrors = 10       // distinct compile errors
	maxProblemLines  = 12       // lines printed about a failure without a compile error
	maxProblemLine   = 512      // bytes of one line shown
	maxContextLines  = 3        // source lines flutter shows under a compile error
	maxProblemBytes  = 4 << 10  // of everything together
	maxProblemScan   = 64 << 10 // bytes of the log's end read for them
)

// Problems is what flutter printed about why a run or build failed.
type Problems struct {
	// Errors are flutter's compile errors ("lib/main.dart:12:3: Error:
	// Expected ';' after this."), each followed by the source lines it
	// showed under it, oldest first, each error once.
	Errors []string
	// Lines, when there is no compile error, are the last lines flutter
	// printed on stderr (on stdout when stderr has none).
	Lines []string
	// More counts the errors (or lines) left out.
	More int
}

// Empty reports whether flutter printed nothing about the failure.
func (p Problems) Empty() bool { return len(p.Errors) == 0 && len(p.Lines) == 0 }

var (
	// compileErrorRE finds a compile error where flutter prints it: alone
	// on its line, after Xcode's "Error (Xcode): " or a Gradle prefix.
	compileErrorRE = regexp.MustCompile(`(?:^|\s)((?:[A-Za-z]:)?[^\s:]+\.dart:\d+:\d+: Error: .*)$`)
	// compileLocRE is the first line of a compile error dart2js splits in
	// two ("lib/main.dart:12:3:" then "Error: …").
	compileLocRE = regexp.MustCompile(`^((?:[A-Za-z]:)?[^\s:]+\.dart:\d+:\d+):$`)
	// traceRE is a line of a Dart stack trace.
	traceRE = regexp.MustCompile(`^\s*(#\d+\s|<asynchronous suspension>)`)
	// errorWordsRE finds a line on stdout that says something failed.
	errorWordsRE = regexp.MustCompile(`(?i)\b(error|exception|failed|failure|fatal|lost connection|crash)`)
)

// noise reports whether a line of flutter's output is for machines: a
// --machine message it could not parse as one, a stack frame, or a line
// of flutter_tools' own code.
func noise(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || strings.HasPrefix(t, "[{") || traceRE.MatchString(line) || strings.Contains(line, "package:flutter_tools/")
}

// outputLine is one line flutter printed, with its stream.
type outputLine struct {
	stream logring.Stream
	text   string
}

// outputLines is the end of the run's log as flutter printed it (stdout
// and stderr; not its events, the errors the app reported on its VM
// service or fly's notes), one per line of text, oldest first.
func (r *Run) outputLines() []outputLine {
	entries := r.ring.Tail(r.ring.Len())
	var out []outputLine
	used := 0
	for i := len(entries) - 1; i >= 0 && used < maxProblemScan; i-- {
		e := entries[i]
		if e.Stream != logring.Stdout && e.Stream != logring.Stderr {
			continue
		}
		used += len(e.Text)
		lines := strings.Split(strings.TrimRight(e.Text, "\n"), "\n")
		for j := len(lines) - 1; j >= 0; j-- {
			out = append(out, outputLine{e.Stream, strings.TrimSuffix(lines[j], "\r")})
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// OutputTail returns the last n lines flutter printed (stdout and
// stderr), oldest first, without its --machine JSON, stack traces and
// flutter_tools' own lines, which stay in the log.
func (r *Run) OutputTail(n int) []string { return outputTail(r.outputLines(), n) }

func outputTail(lines []outputLine, n int) []string {
	var out []string
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if !noise(lines[i].text) {
			out = append(out, lines[i].text)
		}
	}
	slices.Reverse(out)
	return out
}

// Problems returns what flutter printed about the run's failure: its
// compile errors with their source lines, each once, at most
// maxProblemErrors of them; without any, the last lines it printed on
// stderr (or stdout), stack traces and --machine JSON left out.
func (r *Run) Problems() Problems {
	return problems(r.outputLines())
}

func problems(lines []outputLine) Problems {
	var p Problems
	seen := map[string]bool{}
	size := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		msg := ""
		if m := compileErrorRE.FindStringSubmatch(l.text); m != nil {
			msg = m[1]
		} else if m := compileLocRE.FindStringSubmatch(strings.TrimSpace(l.text)); m != nil && i+1 < len(lines) &&
			strings.HasPrefix(lines[i+1].text, "Error: ") {
			msg = m[1] + ": " + lines[i+1].text
			i++
		}
		if msg == "" {
			continue
		}
		msg = cutLine(msg)
		if seen[msg] {
			continue
		}
		seen[msg] = true
		var b strings.Builder
		b.WriteString(msg)
		for n := 0; n < maxContextLines && i+1 < len(lines); n++ {
			next := lines[i+1]
			if next.stream != l.stream || !strings.HasPrefix(next.text, " ") || noise(next.text) {
				break
			}
			b.WriteString("\n" + cutLine(next.text))
			i++
		}
		if len(p.Errors) == maxProblemErrors || size+b.Len() > maxProblemBytes {
			p.More++
			continue
		}
		size += b.Len()
		p.Errors = append(p.Errors, b.String())
	}
	if len(p.Errors) > 0 {
		return p
	}
	for _, stream := range []logring.Stream{logring.Stderr, logring.Stdout} {
		var picked []string
		size = 0
		for i := len(lines) - 1; i >= 0; i-- {
			l := lines[i]
			if l.stream != stream || noise(l.text) {
				continue
			}
			t := cutLine(l.text)
			if len(picked) == maxProblemLines || size+len(t) > maxProblemBytes {
				p.More++
				continue
			}
			size += len(t) + 1
			picked = append(picked, t)
		}
		if len(picked) > 0 {
			for i, j := 0, len(picked)-1; i < j; i, j = i+1, j-1 {
				picked[i], picked[j] = picked[j], picked[i]
			}
			p.Lines = picked
			return p
		}
	}
	return p
}

// LastError returns the last line flutter printed that says what went
// wrong ("Lost connection to device.", app.stop's error, an exception),
// "" when there is none: a line on stderr, or one on stdout that speaks
// of an error. Stack frames, the source lines
// under a compile error and --machine JSON are not such lines.
func (r *Run) LastError() string {
	return lastError(r.outputLines())
}

func lastError(lines []outputLine) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if noise(l.text) || strings.HasPrefix(l.text, " ") {
			continue
		}
		if l.stream == logring.Stdout && !errorWordsRE.MatchString(l.text) {
			continue
		}
		return cutLine(strings.TrimSpace(l.text))
	}
	return ""
}

// cutLine bounds a line shown to maxProblemLine bytes.
func cutLine(s string) string {
	if len(s) <= maxProblemLine {
		return s
	}
	cut := maxProblemLine
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
