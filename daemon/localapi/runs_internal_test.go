package localapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/logring"
)

// TestLineCacheBounded: followers share the encoding of a short line;
// a long one is encoded for each and never kept, so what a followed run
// keeps stays within lineCacheSlots×lineCacheMaxLine bytes; a slot taken
// by a newer seq encodes the older one again, the same.
func TestLineCacheBounded(t *testing.T) {
	var c lineCache
	at := time.Unix(1_800_000_000, 0)
	short := logring.Entry{Seq: 7, Time: at, Stream: logring.Stdout, Text: "flutter: tick 7"}
	a, b := c.line(short), c.line(short)
	if &a[0] != &b[0] {
		t.Error("a short line was encoded twice: followers do not share it")
	}
	long := logring.Entry{Seq: 8, Time: at, Stream: logring.Stdout, Text: strings.Repeat("\x01", 8<<10)} // six bytes each in JSON
	l := c.line(long)
	if p := c[long.Seq%lineCacheSlots].Load(); p != nil && p.seq == long.Seq {
		t.Errorf("a %d-byte line is kept (bound %d)", len(l), lineCacheMaxLine)
	}
	var got struct{ Seq uint64 }
	if err := json.Unmarshal(l, &got); err != nil || got.Seq != 8 || l[len(l)-1] != '\n' {
		t.Errorf("the long line's encoding: seq %d, %v", got.Seq, err)
	}
	newer := short
	newer.Seq += lineCacheSlots
	c.line(newer)
	if again := c.line(short); !bytes.Equal(again, a) {
		t.Errorf("seq 7 after its slot was taken: %s, want %s", again, a)
	}
	var kept int
	for i := range c {
		if p := c[i].Load(); p != nil {
			kept += len(p.line)
		}
	}
	if kept > lineCacheSlots*lineCacheMaxLine {
		t.Errorf("the cache keeps %d bytes", kept)
	}
}
