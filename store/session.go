package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketSessions holds ended MCP sessions, keyed by their end time
// (big-endian unix nanoseconds) and id, so a cursor walks them in order.
var bucketSessions = []byte("sessions")

// maxSessions and maxSessionBytes bound the ended sessions the file
// keeps, across every workspace, by count and by bytes; PutSession drops
// the oldest beyond either. maxSessionField bounds each string of a
// record: what a client named itself is the client's to choose.
const (
	maxSessions     = 500
	maxSessionBytes = 512 << 10
	maxSessionField = 4096
)

// Session is an ended MCP session, for fly://sessions/recent.
type Session struct {
	ID            string    `json:"id"`
	ClientName    string    `json:"client_name,omitempty"`
	ClientVersion string    `json:"client_version,omitempty"`
	Workspace     string    `json:"workspace"`
	Via           string    `json:"via"`
	PeerPID       int       `json:"peer_pid,omitempty"`
	Since         time.Time `json:"since"`
	Ended         time.Time `json:"ended"`
	FilesRead     int64     `json:"files_read"`
	ToolsCalled   int64     `json:"tools_called"`
	Tools         string    `json:"tools,omitempty"`
}

func sessionKey(s Session) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(s.Ended.UnixNano())), s.ID...)
}

// PutSession records an ended session and returns once it is on disk.
func (db *DB) PutSession(s Session) error {
	for _, f := range []*string{&s.ID, &s.ClientName, &s.ClientVersion, &s.Workspace, &s.Via} {
		if len(*f) > maxSessionField {
			*f = strings.ToValidUTF8((*f)[:maxSessionField], "")
		}
	}
	v, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("put session %s: %w", s.ID, err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSessions)
		if err != nil {
			return err
		}
		if err := b.Put(sessionKey(s), v); err != nil {
			return err
		}
		// Stats do not see this transaction's writes: count by cursor.
		n, size := 0, 0
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			n++
			size += len(k) + len(v)
		}
		for k, v := c.First(); k != nil && (n > maxSessions || size > maxSessionBytes); k, v = c.First() {
			size -= len(k) + len(v)
			if err := c.Delete(); err != nil {
				return err
			}
			n--
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put session %s: %w", s.ID, err)
	}
	return nil
}

// Sessions returns up to n ended sessions of workspace ("" for every
// workspace), newest first.
func (db *DB) Sessions(workspace string, n int) ([]Session, error) {
	var vals [][]byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSessions)
		if b == nil {
			return nil
		}
		want := []byte(`"workspace":` + string(mustJSON(workspace)))
		c := b.Cursor()
		for k, v := c.Last(); k != nil && len(vals) < n; k, v = c.Prev() {
			if workspace == "" || bytes.Contains(v, want) {
				vals = append(vals, bytes.Clone(v))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out := make([]Session, 0, len(vals))
	for _, v := range vals {
		var s Session
		if err := json.Unmarshal(v, &s); err != nil {
			continue // a damaged record: the others are still worth showing
		}
		if workspace == "" || s.Workspace == workspace {
			out = append(out, s)
		}
	}
	return out, nil
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
