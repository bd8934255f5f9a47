package holder

import (
	"bytes"
	"errors"
	"io"
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

// FuzzDecoder: the stream decoder flyd and the holder read each other
// with takes from any bytes what ParseRecord takes, record by record,
// arriving in pieces of any size; it stops at the first error, which is
// io.EOF only at a record's boundary, and says whether the next record
// is at hand without reading.
func FuzzDecoder(f *testing.F) {
	var two []byte
	two = AppendRecord(two, Record{Type: TypeStdout, Seq: 1, Data: []byte("a line")})
	two = AppendRecord(two, Record{Type: typeControl, Data: []byte(`{"t":"ping"}`)})
	f.Add(two, uint8(3))
	f.Add(two[:len(two)-2], uint8(0))
	f.Add(AppendRecord(nil, Record{Type: TypeStderr, Seq: 9, Data: bytes.Repeat([]byte("y"), 300)}), uint8(7))
	f.Fuzz(func(t *testing.T, b []byte, piece uint8) {
		d := newDecoder(&pieces{b: b, n: int(piece) + 1})
		rest := b
		for {
			want, n, perr := ParseRecord(rest)
			got, err := d.next()
			if perr != nil {
				switch {
				case err == nil:
					t.Fatalf("the decoder took a record ParseRecord refused (%v): %+v", perr, got)
				case errors.Is(perr, ErrShort) && len(rest) == 0 && err != io.EOF:
					t.Fatalf("at the end of the stream, at a boundary: %v, want io.EOF", err)
				case errors.Is(perr, ErrShort) && len(rest) > 0 && len(rest) >= HeaderLen && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrDamaged):
					t.Fatalf("a record cut by the stream's end: %v, want io.ErrUnexpectedEOF", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("the decoder refused a record ParseRecord took: %v", err)
			}
			if got.Type != want.Type || got.Seq != want.Seq || !bytes.Equal(got.Data, want.Data) {
				t.Fatalf("decoder %+v, ParseRecord %+v", got, want)
			}
			rest = rest[n:]
			if d.buffered() && (len(rest) < HeaderLen || !spoolType(Type(rest[8]))) {
				t.Fatalf("buffered says a spool record is at hand before %x", rest[:min(len(rest), HeaderLen)])
			}
		}
	})
}

// pieces reads b n bytes at a time.
type pieces struct {
	b []byte
	n int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	k := copy(b[:min(len(b), p.n)], p.b)
	p.b = p.b[k:]
	return k, nil
}

// TestDecoderLargestRecord: a record of the largest payload, arriving in
// pieces, is read whole, and the one after it too.
func TestDecoderLargestRecord(t *testing.T) {
	big := Record{Type: TypeStdout, Seq: 1, Data: bytes.Repeat([]byte("z"), MaxPayload)}
	small := Record{Type: TypeExit, Seq: 2, Data: []byte(`{"code":0}`)}
	d := newDecoder(&pieces{b: AppendRecord(AppendRecord(nil, big), small), n: 1000})
	for _, want := range []Record{big, small} {
		got, err := d.next()
		if err != nil || got.Seq != want.Seq || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("next = seq %d, %d bytes, %v; want seq %d, %d bytes", got.Seq, len(got.Data), err, want.Seq, len(want.Data))
		}
	}
	if _, err := d.next(); err != io.EOF {
		t.Fatalf("next at the end = %v, want io.EOF", err)
	}
}

// BenchmarkDecoder: records of app lines read from a stream, as flyd
// reads its holder's.
func BenchmarkDecoder(b *testing.B) {
	var stream []byte
	for i := range 1000 {
		stream = AppendRecord(stream, Record{Type: TypeStdout, Seq: uint64(i + 1), Time: time.Now(), Data: []byte(`flutter: {"tick":42,"at":"2026-11-28T03:00:00Z","note":"a line an app prints"}`)})
	}
	b.SetBytes(int64(len(stream)))
	r := bytes.NewReader(stream)
	d := newDecoder(r)
	for b.Loop() {
		r.Reset(stream)
		d.r.Reset(r)
		d.held = 0
		for range 1000 {
			if _, err := d.next(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
