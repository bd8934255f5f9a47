package store

import (
	"fmt"
	"testing"
	"time"
)

func TestSessionsPersistNewestFirst(t *testing.T) {
	path := t.TempDir() + "/fly.db"
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := range maxSessions + 10 {
		ws := "/w/a"
		if i%2 == 1 {
			ws = "/w/b"
		}
		s := Session{ID: fmt.Sprintf("s%03d", i), ClientName: "cursor", Workspace: ws, Via: "socket",
			Since: base.Add(time.Duration(i) * time.Minute), Ended: base.Add(time.Duration(i)*time.Minute + 30*time.Second), FilesRead: int64(i)}
		if err := db.PutSession(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if db, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Sessions("/w/a", 3)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{got[0].ID, got[1].ID, got[2].ID}
	if fmt.Sprint(ids) != "[s508 s506 s504]" || got[0].FilesRead != 508 || !got[0].Ended.Equal(base.Add(508*time.Minute+30*time.Second)) {
		t.Errorf("Sessions(/w/a, 3) = %v (%+v), want the newest of /w/a after a reopen", ids, got[0])
	}
	all, _ := db.Sessions("", 10_000)
	if len(all) != maxSessions || all[len(all)-1].ID != "s010" {
		t.Errorf("kept %d sessions, oldest %s; want %d, oldest s010", len(all), all[len(all)-1].ID, maxSessions)
	}
}
