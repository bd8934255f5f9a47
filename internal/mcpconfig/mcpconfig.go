// Package mcpconfig reads and writes files in the "mcpServers" shape that
// editors use for their MCP servers and that flyd's upstreams.json shares,
// so that people paste what they already have. It keeps the servers in
// the order the file gives them (the order decides which upstream owns a
// URI two of them claim) and every other key of the file as it was.
//
// It only parses and validates: it never starts anything. It imports the
// standard library only, so that flyd and flyctl share it.
package mcpconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/wire"
)

// MaxFileBytes bounds a config file: anything larger is refused unread.
const MaxFileBytes = 1 << 20

// Sharing modes of an upstream.
const (
	ShareWorkspace = "workspace" // one process per workspace root (the default)
	ShareGlobal    = "global"    // one process for every session
	ShareSession   = "session"   // one process per session
)

// DefaultTimeout bounds one call to an upstream unless its entry says
// otherwise.
const DefaultTimeout = 2 * time.Minute

// Server is one entry of mcpServers. Fields flyd does not know are kept
// in Extra, so that rewriting an editor's file loses nothing.
type Server struct {
	Name    string            `json:"-"`
	Type    string            `json:"type,omitempty"` // "stdio" (or empty); editors also write "http" and "sse"
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`

	// flyd's own fields.
	Share      string  `json:"share,omitempty"`       // workspace (default), global or session
	Prefix     *string `json:"prefix,omitempty"`      // of its tool and prompt names; default Name; "" for none
	TimeoutSec float64 `json:"timeout_sec,omitempty"` // of one call; default DefaultTimeout
	Disabled   bool    `json:"disabled,omitempty"`
	// Protocol is the newest MCP revision flyd offers the server: "" for
	// the newest flyd speaks, which a server of the handshake era answers
	// with the newest it speaks; "2025-11-25" keeps one that speaks both
	// eras in the handshake era.
	Protocol string `json:"protocol,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Stdio reports whether the entry starts a local process (the only kind
// flyd can share).
func (s Server) Stdio() bool {
	return s.Command != "" && (s.Type == "" || s.Type == "stdio")
}

// SharedAs is the entry's sharing mode with its default.
func (s Server) SharedAs() string {
	if s.Share == "" {
		return ShareWorkspace
	}
	return s.Share
}

// ToolPrefix is the prefix of the entry's tool and prompt names: "" when
// the entry says "prefix": "", and its names are exposed as they are.
func (s Server) ToolPrefix() string {
	if s.Prefix == nil {
		return s.Name
	}
	return *s.Prefix
}

// Timeout is how long one call may take.
func (s Server) Timeout() time.Duration {
	if s.TimeoutSec <= 0 {
		return DefaultTimeout
	}
	return time.Duration(s.TimeoutSec * float64(time.Second))
}

// Equal reports whether two entries start the same process the same way.
func (s Server) Equal(o Server) bool {
	a, _ := json.Marshal(s)
	b, _ := json.Marshal(o)
	return s.Name == o.Name && bytes.Equal(a, b)
}

var knownFields = []string{"type", "command", "args", "env", "url", "share", "prefix", "timeout_sec", "disabled", "protocol"}

// ProtocolVersions are the MCP revisions an entry's "protocol" may name:
// those flyd speaks to upstreams, oldest first.
var ProtocolVersions = wire.MCPRevisions

func (s Server) MarshalJSON() ([]byte, error) {
	type plain Server
	b, err := json.Marshal(plain(s))
	if err != nil || len(s.Extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range s.Extra {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

func (s *Server) UnmarshalJSON(b []byte) error {
	type plain Server
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for k := range m {
		if slices.Contains(knownFields, k) {
			delete(m, k)
		}
	}
	name := s.Name
	*s = Server(p)
	s.Name = name
	if len(m) > 0 {
		s.Extra = m
	}
	return nil
}

// File is a parsed config file: its servers in file order and every
// other top-level key as it was.
type File struct {
	Servers []Server
	Other   map[string]json.RawMessage
}

// Server returns the entry named name.
func (f *File) Server(name string) (Server, bool) {
	for _, s := range f.Servers {
		if s.Name == name {
			return s, true
		}
	}
	return Server{}, false
}

// Put adds s, or replaces the entry of the same name in place.
func (f *File) Put(s Server) {
	for i := range f.Servers {
		if f.Servers[i].Name == s.Name {
			f.Servers[i] = s
			return
		}
	}
	f.Servers = append(f.Servers, s)
}

// Remove deletes the entry named name and reports whether there was one.
func (f *File) Remove(name string) bool {
	n := len(f.Servers)
	f.Servers = slices.DeleteFunc(f.Servers, func(s Server) bool { return s.Name == name })
	return len(f.Servers) != n
}

// Parse reads a config file's bytes. An empty input is an empty file.
func Parse(data []byte) (*File, error) {
	f := &File{Other: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return f, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	raw, ok := top["mcpServers"]
	delete(top, "mcpServers")
	f.Other = top
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return f, nil
	}
	servers, err := parseServers(raw)
	if err != nil {
		return nil, err
	}
	f.Servers = servers
	return f, nil
}

// parseServers decodes the mcpServers object in its key order.
func parseServers(raw json.RawMessage) ([]Server, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New(`"mcpServers" is not an object`)
	}
	var out []Server
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("mcpServers: %w", err)
		}
		name, _ := t.(string)
		var s Server
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("mcpServers.%s: %w", name, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("mcpServers names %q twice", name)
		}
		seen[name] = true
		s.Name = name
		out = append(out, s)
	}
	return out, nil
}

// Marshal writes f back: mcpServers in order, then the other keys.
func (f *File) Marshal() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{\n  \"mcpServers\": {")
	for i, s := range f.Servers {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(s.Name)
		v, err := json.MarshalIndent(s, "    ", "  ")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\n    %s: %s", name, v)
	}
	if len(f.Servers) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("}")
	keys := make([]string, 0, len(f.Other))
	for k := range f.Other {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name, _ := json.Marshal(k)
		var v bytes.Buffer
		if err := json.Indent(&v, f.Other[k], "  ", "  "); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, ",\n  %s: %s", name, v.Bytes())
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

// ReadFile reads and parses path. A missing file is an empty one; a file
// over MaxFileBytes is refused.
func ReadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return &File{Other: map[string]json.RawMessage{}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s is over %d bytes", path, MaxFileBytes)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// WriteFile writes f to path atomically (a temporary file renamed over
// it), with mode perm.
func WriteFile(path string, f *File, perm os.FileMode) error {
	b, err := f.Marshal()
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, perm); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// validName reports whether s is 1 to 32 of [A-Za-z0-9_-]: a server name
// or tool prefix. (A regexp here cost every flyctl start, the shim's
// included, a quarter of a millisecond to compile.)
func validName(s string) bool {
	if len(s) < 1 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// validEnvKey reports whether s is an environment variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func validEnvKey(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// MaxServers bounds how many upstreams one file may name.
const MaxServers = 64

// Upstreams validates f as flyd's upstreams.json and returns the servers
// flyd runs, in order (disabled ones left out). Every problem is an error
// that names the entry: flyd keeps its previous configuration rather than
// run half of a broken one.
func Upstreams(f *File) ([]Server, error) {
	if len(f.Servers) > MaxServers {
		return nil, fmt.Errorf("%d servers: at most %d", len(f.Servers), MaxServers)
	}
	var out []Server
	byPrefix := map[string]string{}
	for _, s := range f.Servers {
		if !validName(s.Name) {
			return nil, fmt.Errorf("server name %q: use 1 to 32 of [A-Za-z0-9_-]", s.Name)
		}
		if s.Disabled {
			continue
		}
		if !s.Stdio() {
			return nil, fmt.Errorf("server %s: flyd shares stdio servers only (a \"command\"); connect to URL servers from the editor", s.Name)
		}
		switch s.Share {
		case "", ShareWorkspace, ShareGlobal, ShareSession:
		default:
			return nil, fmt.Errorf("server %s: share %q: use workspace, global or session", s.Name, s.Share)
		}
		if s.Prefix != nil && *s.Prefix != "" && !validName(*s.Prefix) {
			return nil, fmt.Errorf("server %s: prefix %q: use 1 to 32 of [A-Za-z0-9_-], or \"\" for none", s.Name, *s.Prefix)
		}
		for k := range s.Env {
			if !validEnvKey(k) {
				return nil, fmt.Errorf("server %s: environment variable name %q is not valid", s.Name, k)
			}
		}
		if s.TimeoutSec < 0 {
			return nil, fmt.Errorf("server %s: timeout_sec must be positive", s.Name)
		}
		if s.Protocol != "" && !slices.Contains(ProtocolVersions, s.Protocol) {
			return nil, fmt.Errorf("server %s: protocol %q: use one of %s, or leave it out for the newest", s.Name, s.Protocol, strings.Join(ProtocolVersions, ", "))
		}
		p := strings.ToLower(s.ToolPrefix())
		if other, ok := byPrefix[p]; ok && p == "" {
			return nil, fmt.Errorf("servers %s and %s both have \"prefix\": \"\": at most one server's names go unprefixed", other, s.Name)
		} else if ok {
			return nil, fmt.Errorf("servers %s and %s both name their tools %s_*: every tool they share would be named twice; give one a \"prefix\"", other, s.Name, s.ToolPrefix())
		}
		byPrefix[p] = s.Name
		out = append(out, s)
	}
	return out, nil
}
