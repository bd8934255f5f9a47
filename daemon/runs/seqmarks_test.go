package runs

import (
	"path/filepath"
	"testing"
)

// TestSeqMarksSurvive: what a flyd stored in its shared mapping of the
// seq marks, and did not clear (a run still live when it ended), is what
// the next flyd reads, once; the next one after that reads nothing.
func TestSeqMarksSurvive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seqmarks")
	m, left, err := openSeqMarks(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("a new file left %v", left)
	}
	live, done := m.track("01live"), m.track("01done")
	m.set(live, 42)
	m.set(live, 41) // a lower seq never replaces a higher one
	m.set(done, 7)
	m.untrack("01done")
	m.close()

	m, left, err = openSeqMarks(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left["01live"] != 42 {
		t.Errorf("the next open read %v, want only 01live at 42", left)
	}
	m.close()
	m, left, err = openSeqMarks(path)
	if err != nil {
		t.Fatal(err)
	}
	m.close()
	if len(left) != 0 {
		t.Errorf("a third open read %v, want nothing: the second one cleared the file", left)
	}
}
