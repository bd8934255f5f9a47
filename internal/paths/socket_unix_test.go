//go:build unix

package paths

import (
	"strings"
	"testing"
)

func TestCheckSocketPath(t *testing.T) {
	if err := CheckSocketPath("/run/user/1000/fly/flyd.sock"); err != nil {
		t.Errorf("CheckSocketPath(short) = %v", err)
	}
	long := "/" + strings.Repeat("d", 120) + "/flyd.sock"
	if err := CheckSocketPath(long); err == nil || !strings.Contains(err.Error(), EnvSocket) || !strings.Contains(err.Error(), long) {
		t.Errorf("CheckSocketPath(long) = %v, want the path and a hint", err)
	}
}
