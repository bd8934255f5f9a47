package upstream

import (
	"os/exec"
	"strconv"
	"strings"
)

// rss is the resident set size of pid in bytes, as ps reports it.
func rss(pid int) (int64, error) {
	out, err := exec.Command("ps", "-o", "rss=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0, err
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0, err
	}
	return kb << 10, nil
}
