package daemon

import (
	"strings"
	"testing"
)

// TestStatelessKeyBounded: what keys a stateless client's session is of
// a fixed size, whatever the client sends.
func TestStatelessKeyBounded(t *testing.T) {
	huge := strings.Repeat("x", 3<<20)
	for _, parts := range [][]string{{"", "", ""}, {huge, huge, huge}, {"/a", "tools=app", strings.Repeat("y", maxClientHeader)}} {
		if k := hashKey(parts...); len(k) != 32 {
			t.Errorf("hashKey(%d bytes) is %d bytes, want 32", len(strings.Join(parts, "")), len(k))
		}
	}
	if hashKey("a", "bc") == hashKey("ab", "c") {
		t.Error("hashKey(a, bc) = hashKey(ab, c)")
	}
}
