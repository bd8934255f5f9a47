package upstream

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestExposedName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	long := strings.Repeat("analyze_", 12)
	for _, tc := range []struct{ prefix, name, want string }{
		{"dart", "analyze_files", "dart_analyze_files"},
		{"fs", "read.file/v2", "fs_read_file_v2"},
		{"x", "héllo", "x_h_llo"},
	} {
		if got := exposedName(tc.prefix, tc.name); got != tc.want {
			t.Errorf("exposedName(%q, %q) = %q, want %q", tc.prefix, tc.name, got, tc.want)
		}
	}
	a, b := exposedName("dart", long+"a"), exposedName("dart", long+"b")
	if a == b || !valid.MatchString(a) || !valid.MatchString(b) {
		t.Fatalf("long names: %q and %q; want two valid, different names", a, b)
	}
}

type mapCache map[string][]byte

func (m mapCache) GetCache(k string) ([]byte, error) {
	if v, ok := m[k]; ok {
		return v, nil
	}
	return nil, os.ErrNotExist
}
func (m mapCache) PutCache(k string, v []byte) error { m[k] = v; return nil }

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "upstreams.json")
	if s, err := Load(p, nil); err != nil || s != nil {
		t.Fatalf("Load of a missing file = %v, %v; want nothing", s, err)
	}
	write := func(body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"mcpServers":{"a":{"command":"x"},"a_b":{"command":"y"}}}`, 0o600)
	if s, err := Load(p, nil); err != nil || len(s) != 2 {
		t.Fatalf("Load = %v, %v", s, err)
	}
	// Tools seen before: a's "b_c" and a_b's "c" would both be a_b_c.
	cache := mapCache{}
	for name, tool := range map[string]string{"a": "b_c", "a_b": "c"} {
		b, _ := json.Marshal(lists{Tools: []*mcp.Tool{{Name: tool}}})
		cache[cacheKey(name)] = b
	}
	if _, err := Load(p, cache); err == nil || !strings.Contains(err.Error(), "servers a and a_b both give a tool named a_b_c") {
		t.Fatalf("Load with colliding cached tools = %v", err)
	}
	write(`{"mcpServers":{"a":{"command":"x"}}}`, 0o666)
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("Load of a world-writable file = %v", err)
	}
}
