package holder

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	for _, r := range []Record{
		{Type: TypeStdout, Seq: 1, Time: at, Data: []byte("flutter: tick 1")},
		{Type: TypeStderr, Seq: 1 << 40, Time: at, Cut: true, Data: bytes.Repeat([]byte("x"), MaxLine)},
		{Type: TypeExit, Seq: 7, Data: []byte(`{"code":0,"desc":"exit code 0"}`)},
		{Type: typeControl, Data: []byte(`{"t":"ping"}`)},
		{Type: TypeStdout, Seq: 2, Time: at, Data: []byte{}},
	} {
		b := AppendRecord(nil, r)
		got, n, err := ParseRecord(b)
		if err != nil || n != len(b) {
			t.Fatalf("ParseRecord(AppendRecord(%+v)) = %d, %v", r, n, err)
		}
		if got.Type != r.Type || got.Seq != r.Seq || got.Cut != r.Cut || !got.Time.Equal(r.Time) || !bytes.Equal(got.Data, r.Data) {
			t.Errorf("ParseRecord(AppendRecord(%+v)) = %+v", r, got)
		}
	}
}

// A record cut anywhere is short; a changed byte anywhere is damaged (or,
// in the length, short or damaged): never a record with other content.
func TestRecordTornOrDamaged(t *testing.T) {
	b := AppendRecord(nil, Record{Type: TypeStdout, Seq: 3, Time: time.Now(), Data: []byte("hello world")})
	for i := range len(b) {
		if _, _, err := ParseRecord(b[:i]); !errors.Is(err, ErrShort) {
			t.Errorf("ParseRecord(first %d of %d bytes) = %v, want ErrShort", i, len(b), err)
		}
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, _, err := ParseRecord(c); err == nil {
			t.Errorf("ParseRecord with byte %d changed: no error", i)
		}
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add(AppendRecord(nil, Record{Type: TypeStdout, Seq: 1, Data: []byte("a line")}))
	f.Add(AppendRecord(nil, Record{Type: typeControl, Data: []byte(`{"t":"hello","v":1}`)}))
	f.Add([]byte("FLYSPOOL"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := ParseRecord(b)
		if err != nil {
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrDamaged) {
				t.Fatalf("ParseRecord: unexpected error %v", err)
			}
			return
		}
		if n < HeaderLen || n > len(b) || len(r.Data) != n-HeaderLen || len(r.Data) > MaxPayload {
			t.Fatalf("ParseRecord = %d bytes, %d of data, of %d", n, len(r.Data), len(b))
		}
		if again := AppendRecord(nil, r); !bytes.Equal(again, b[:n]) {
			t.Fatalf("a parsed record re-encodes differently:\n%x\n%x", again, b[:n])
		}
	})
}

func TestNegotiate(t *testing.T) {
	for _, c := range []struct {
		flyd, holder Range
		v            int
		ok           bool
	}{
		{Range{1, 1}, Range{1, 1}, 1, true},
		{Range{1, 2}, Range{1, 1}, 1, true}, // a newer flyd speaks an older holder's version
		{Range{1, 1}, Range{1, 2}, 1, true}, // an older flyd, a newer holder
		{Range{2, 3}, Range{1, 2}, 2, true},
		{Range{3, 3}, Range{1, 2}, 0, false},
		{Range{1, 1}, Range{2, 2}, 0, false},
	} {
		v, ok := Negotiate(c.flyd, c.holder)
		if ok != c.ok || (ok && v != c.v) {
			t.Errorf("Negotiate(%v, %v) = %d, %v; want %d, %v", c.flyd, c.holder, v, ok, c.v, c.ok)
		}
	}
}
