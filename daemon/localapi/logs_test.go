package localapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
)

// This file holds the tests of a run's log stream, and the helpers that read one.

// ndLine is any line of a log stream, decoded.
type ndLine = wire.LogLine

// logs reads a whole non-follow log stream.
func (a *apiServer) logs(t testing.TB, id, query string) []ndLine {
	t.Helper()
	resp := a.do(t, "GET", "/v1/runs/"+id+"/logs?"+query)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("logs?%s = %s %s", query, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != wire.ContentNDJSON {
		t.Errorf("logs?%s: Content-Type %q, want %s", query, ct, wire.ContentNDJSON)
	}
	lines, err := decodeLines(resp.Body, nil)
	if err != nil {
		t.Fatalf("logs?%s: %v", query, err)
	}
	return lines
}

// decodeLines decodes NDJSON lines until EOF or an error, sending each to
// each if it is not nil.
func decodeLines(r io.Reader, each chan<- ndLine) ([]ndLine, error) {
	br := bufio.NewReader(r)
	var out []ndLine
	for {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			if b[len(b)-1] != '\n' {
				return out, fmt.Errorf("line without newline: %q (%v)", b, err)
			}
			var l ndLine
			if jerr := json.Unmarshal(b, &l); jerr != nil {
				return out, fmt.Errorf("bad line %q: %v", b, jerr)
			}
			out = append(out, l)
			if each != nil {
				each <- l
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func lastLine(ls []ndLine) ndLine {
	if len(ls) == 0 {
		return ndLine{}
	}
	return ls[len(ls)-1]
}

// checkContiguous checks that entries and gaps account for every seq
// after after, in order, and returns the last seq.
func checkContiguous(t testing.TB, lines []ndLine, after uint64) uint64 {
	t.Helper()
	cur := after
	for i, l := range lines {
		switch l.Type {
		case wire.LogLineEntry:
			if l.Seq != cur+1 {
				t.Fatalf("line %d: entry seq %d after seq %d, want %d", i, l.Seq, cur, cur+1)
			}
		case wire.LogLineGap:
			if l.Resume != cur+l.Lost+1 || l.Seq != l.Resume-1 || l.Lost == 0 {
				t.Fatalf("line %d: gap %+v after seq %d does not account for the missing seqs", i, l, cur)
			}
		default:
			continue
		}
		cur = l.Seq
	}
	return cur
}

func entryTexts(lines []ndLine) []string {
	var out []string
	for _, l := range lines {
		if l.Type == wire.LogLineEntry {
			out = append(out, l.Text)
		}
	}
	return out
}

func TestParseLogsParams(t *testing.T) {
	tests := []struct {
		query string
		want  logsParams
		err   string
	}{
		{"", logsParams{}, ""},
		{"after=42", logsParams{after: 42}, ""},
		{"tail=10", logsParams{tail: 10, hasTail: true}, ""},
		{"tail=0", logsParams{hasTail: true}, ""},
		{"follow=1&after=7&tail=3", logsParams{after: 7, tail: 3, hasTail: true, follow: true}, ""},
		{"follow=false", logsParams{}, ""},
		{"after=-1", logsParams{}, `after="-1" is not a seq`},
		{"after=x", logsParams{}, `after="x" is not a seq`},
		{"tail=-5", logsParams{}, `tail="-5" is not a number of lines`},
		{"tail=99999999999", logsParams{}, `tail="99999999999" is not a number of lines`},
		{"follow=perhaps", logsParams{}, `follow="perhaps" is not a boolean`},
		{"since=3", logsParams{}, `unknown query parameter "since"`},
		{"after=1&after=2", logsParams{}, `"after" is given 2 times`},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		got, err := parseLogsParams(q)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseLogsParams(%q) error = %v, want %q", tt.query, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("parseLogsParams(%q) error = %v", tt.query, err)
		case tt.err == "" && got != tt.want:
			t.Errorf("parseLogsParams(%q) = %+v, want %+v", tt.query, got, tt.want)
		}
	}
}

func TestHTTPRunsLogs(t *testing.T) {
	a := newAPIServer(t, serverConfig{}, store.Options{}, false)
	r := a.start(t, fakeflutter.EnvLines+"=20", fakeflutter.EnvTickMS+"=1")
	flytest.WaitLine(t, r.Ring(), "flutter: tick 20")
	last := r.Ring().Last()

	all := a.logs(t, r.ID(), "")
	end := all[len(all)-1]
	if end.Type != wire.LogLineEnd || end.State != "running" || end.ExitCode != nil || end.LastSeq != last {
		t.Errorf("last line = %+v, want end of a running run at seq %d", end, last)
	}
	if got := checkContiguous(t, all[:len(all)-1], 0); got != last {
		t.Errorf("entries end at seq %d, want %d", got, last)
	}
	texts := entryTexts(all)
	if !strings.HasPrefix(texts[0], "started: flutter run --machine") || !contains(texts, "flutter: tick 1") || !contains(texts, "flutter: tick 20") {
		t.Errorf("entries %q lack the start note or the ticks", texts)
	}
	for _, l := range all[:len(all)-1] {
		if l.Time.IsZero() || l.Stream == "" {
			t.Errorf("entry %+v lacks time or stream", l)
		}
	}

	tests := []struct {
		query      string
		first, end uint64 // seqs of the first and last entry; 0, 0 for none
	}{
		{"after=5", 6, last},
		{"tail=5", last - 4, last},
		{"after=" + strconv.FormatUint(last-3, 10) + "&tail=10", last - 2, last}, // tail applies after after
		{"after=2&tail=3", last - 2, last},
		{"tail=0", 0, 0},
		{"after=" + strconv.FormatUint(last, 10), 0, 0},
		{"after=999999&follow=0", 0, 0}, // a cursor past the end starts at the end
		{"tail=100000", 1, last},
	}
	for _, tt := range tests {
		lines := a.logs(t, r.ID(), tt.query)
		entries := lines[:len(lines)-1]
		end := lines[len(lines)-1]
		if end.Type != wire.LogLineEnd {
			t.Errorf("logs?%s: last line %+v, want end", tt.query, end)
		}
		if tt.first == 0 {
			if len(entries) != 0 || end.LastSeq != last {
				t.Errorf("logs?%s = %+v, want only an end line with the cursor", tt.query, lines)
			}
			continue
		}
		if len(entries) == 0 || entries[0].Seq != tt.first || end.LastSeq != tt.end {
			t.Errorf("logs?%s: first entry %+v, end %+v; want entries %d..%d", tt.query, lastLine(entries[:min(1, len(entries))]), end, tt.first, tt.end)
			continue
		}
		checkContiguous(t, entries, tt.first-1)
	}

	for _, q := range []string{"after=-1", "tail=x", "follow=maybe", "since=3"} {
		var e errorReply
		a.getJSON(t, "GET", "/v1/runs/"+r.ID()+"/logs?"+q, 400, &e)
		if e.Error == "" {
			t.Errorf("logs?%s: no error message", q)
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestHTTPRunsVersionHeader: log streams carry the version header too.
func TestHTTPRunsVersionHeader(t *testing.T) {
	a := newAPIServer(t, serverConfig{}, store.Options{}, false)
	r := a.start(t, fakeflutter.EnvTickMS+"=0")
	resp := a.do(t, "GET", "/v1/runs/"+r.ID()+"/logs")
	defer resp.Body.Close()
	if v := resp.Header.Get(wire.HeaderVersion); v != wire.VersionHeader() {
		t.Errorf("%s = %q, want %q", wire.HeaderVersion, v, wire.VersionHeader())
	}
}
