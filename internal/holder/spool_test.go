package holder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func lines(from, to int) []Record {
	var out []Record
	for i := from; i <= to; i++ {
		out = append(out, Record{Type: TypeStdout, Time: time.Now(), Data: fmt.Appendf(nil, "line %d", i)})
	}
	return out
}

// readAll reads the spool in dir after seq after: the lines, and whether
// it ended at a torn record.
func readAll(t *testing.T, dir string, after uint64) ([]string, []uint64, bool) {
	t.Helper()
	var texts []string
	var seqs []uint64
	torn, err := ReadSpool(dir, after, func(r Record) error {
		texts = append(texts, string(r.Data))
		seqs = append(seqs, r.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return texts, seqs, torn
}

func TestSpoolAppendsAndReadsAfter(t *testing.T) {
	dir := t.TempDir()
	s, err := newSpool(dir, 64<<10, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for i := 0; i < 100; i++ {
		if _, err := s.append(lines(i*100+1, i*100+100)); err != nil {
			t.Fatal(err)
		}
	}
	texts, seqs, torn := readAll(t, dir, 4321)
	if torn || len(texts) != 10000-4321 || texts[0] != "line 4322" || seqs[0] != 4322 || texts[len(texts)-1] != "line 10000" {
		t.Fatalf("ReadSpool after 4321 = %d lines from %q (seq %v), torn %v", len(texts), texts[0], seqs[0], torn)
	}
	if !slices.IsSorted(seqs) {
		t.Fatal("seqs out of order")
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, segmentPrefix+"*")); len(segs) < 2 {
		t.Errorf("%d segments for 10000 lines of 64 KiB segments", len(segs))
	}
}

// A segment whose end is a torn record (the holder died writing it) or
// garbage is read up to its last whole record, and says it was torn.
func TestSpoolTornTail(t *testing.T) {
	for _, tail := range []struct {
		name string
		b    []byte
	}{
		{"half a record", AppendRecord(nil, Record{Type: TypeStdout, Seq: 11, Data: []byte("torn line")})[:20]},
		{"a damaged record", func() []byte {
			b := AppendRecord(nil, Record{Type: TypeStdout, Seq: 11, Data: []byte("bad line")})
			b[len(b)-1] ^= 1
			return b
		}()},
	} {
		t.Run(tail.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := newSpool(dir, 1<<20, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.append(lines(1, 10)); err != nil {
				t.Fatal(err)
			}
			s.close()
			f, err := os.OpenFile(filepath.Join(dir, segmentName(1)), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tail.b)
			f.Close()
			texts, _, torn := readAll(t, dir, 0)
			if !torn || len(texts) != 10 || texts[9] != "line 10" {
				t.Fatalf("ReadSpool = %q, torn %v; want the 10 whole lines, torn", texts, torn)
			}
		})
	}
}

// An ack removes the segments it covers, the one written too (a new one
// takes its place), so that a spool with a file-size limit gets room.
func TestSpoolAckTrims(t *testing.T) {
	dir := t.TempDir()
	s, err := newSpool(dir, 64<<10, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if _, err := s.append(lines(1, 5000)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.append(lines(5001, 6000)); err != nil {
		t.Fatal(err)
	}
	before := s.size()
	s.ack(5000)
	if s.size() >= before {
		t.Errorf("size after ack %d, before %d: nothing trimmed", s.size(), before)
	}
	texts, _, _ := readAll(t, dir, 0)
	if len(texts) != 1000 || texts[0] != "line 5001" {
		t.Errorf("after ack 5000 the spool holds %d lines from %q, want 1000 from line 5001", len(texts), texts[0])
	}
	s.ack(6000)
	if texts, _, _ := readAll(t, dir, 0); len(texts) != 0 {
		t.Errorf("after acking everything the spool holds %d lines", len(texts))
	}
	if seq, err := s.append(lines(6001, 6001)); err != nil || seq != 6001 {
		t.Errorf("append after the trim = %d, %v; want seq 6001", seq, err)
	}
}

// A spool that holds its bound of unacknowledged bytes refuses more until
// an ack.
func TestSpoolBound(t *testing.T) {
	dir := t.TempDir()
	s, err := newSpool(dir, 64<<10, 128<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	var last uint64
	for i := 1; ; i += 100 {
		seq, err := s.append(lines(i, i+99))
		if errors.Is(err, errSpoolFull) {
			break
		}
		if err != nil || i > 100_000 {
			t.Fatalf("append: %v after %d lines", err, i)
		}
		last = seq
	}
	s.ack(last)
	if _, err := s.append(lines(1, 100)); err != nil {
		t.Fatalf("append after an ack: %v", err)
	}
}

// locate finds where the records after a seq start, in any segment.
func TestSpoolLocate(t *testing.T) {
	dir := t.TempDir()
	s, err := newSpool(dir, 64<<10, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if _, err := s.append(lines(1, 9000)); err != nil {
		t.Fatal(err)
	}
	s.append(lines(9001, 9999))
	for _, after := range []uint64{0, 1, 4999, 9000, 9998, 9999} {
		p, err := s.locate(after)
		if err != nil {
			t.Fatal(err)
		}
		var f *os.File
		buf := make([]byte, 1<<20)
		var got []uint64
		for {
			n, moved, err := s.readAt(&p, &f, buf)
			if err != nil {
				t.Fatal(err)
			}
			for b := buf[:n]; len(b) > 0; {
				r, m, err := ParseRecord(b)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, r.Seq)
				b = b[m:]
			}
			if n == 0 && !moved {
				break
			}
		}
		if f != nil {
			f.Close()
		}
		if uint64(len(got)) != 9999-after || (len(got) > 0 && got[0] != after+1) {
			t.Errorf("read after %d: %d records from %v", after, len(got), got[:min(1, len(got))])
		}
	}
}
