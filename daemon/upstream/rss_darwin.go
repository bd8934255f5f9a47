package upstream

import (
	"os/exec"
	"strconv"
	"strings"
)

// rss is the resident set size of pid in bytes, or 0 if unknown.
func rss(pid int) int64 {
	out, err := exec.Command("ps", "-o", "rss=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}
