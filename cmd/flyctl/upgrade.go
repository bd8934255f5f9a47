package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/wire"
)

// This file is what flyctl says after an upgrade, when the flyd that
// answers is older than flyctl: the shim and every command that asks flyd
// see its release in the X-Fly-Version header of its answers, and tell the
// user once how to restart it. (A flyd of another protocol is refused
// outright, with which side to upgrade: wire.CheckPeer.)

// olderFlydNotice returns noticeOlderFlyd, for a client or the shim to
// call with each flyd's X-Fly-Version header, from any goroutine.
func (c *call) olderFlydNotice() func(header string) {
	c.machine() // made now, before other goroutines ask for it
	return c.noticeOlderFlyd
}

// noticeOlderFlyd tells the user on stderr, once per command, when the
// flyd whose X-Fly-Version header is header speaks this protocol but is
// an older release than this flyctl, and how to restart it.
func (c *call) noticeOlderFlyd(header string) {
	v, protocol, ok := wire.ParseVersionHeader(header)
	if !ok || protocol != wire.Protocol {
		return
	}
	if cmp, ok := compareVersions(v, wire.Version); !ok || cmp >= 0 {
		return
	}
	c.machine().notice.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		pid := 0
		if lc, err := newClient(c.getenv); err == nil {
			pid, _ = lc.Ping(ctx)
			lc.CloseIdleConnections()
		}
		fmt.Fprintf(c.stderr, "flyctl: flyd %s is running, older than this flyctl %s: %s\n", v, wire.Version, c.restartAdvice(pid))
	})
}

// restartAdvice says how to replace the running flyd (pid, when known)
// with this version's: restart the service that runs it, else stop it so
// that the next flyctl mcp starts the new one.
func (c *call) restartAdvice(pid int) string {
	if c.serviceInstalled() {
		return "restart it with: flyctl service restart (its flutter runs go on)"
	}
	if pid > 0 {
		return fmt.Sprintf("stop it (%s; its flutter runs go on), and the next flyctl mcp starts the new one", killHint(pid))
	}
	return "stop it (flyctl status shows its pid; its flutter runs go on), and the next flyctl mcp starts the new one"
}

// compareVersions compares two releases, "1.2.3", "v1.2.3" or
// "0.1.0-dev": -1, 0 or 1 as a is older than, the same as or newer than
// b, by semantic versioning's rules (a pre-release is older than its
// release; build metadata after + is ignored). ok is false when either is
// not such a version.
func compareVersions(a, b string) (cmp int, ok bool) {
	an, apre, ok1 := parseVersion(a)
	bn, bpre, ok2 := parseVersion(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	for i := range max(len(an), len(bn)) {
		x, y := 0, 0
		if i < len(an) {
			x = an[i]
		}
		if i < len(bn) {
			y = bn[i]
		}
		if x != y {
			return sign(x - y), true
		}
	}
	switch {
	case apre == bpre:
		return 0, true
	case apre == "":
		return 1, true
	case bpre == "":
		return -1, true
	}
	ap, bp := strings.Split(apre, "."), strings.Split(bpre, ".")
	for i := range min(len(ap), len(bp)) {
		if ap[i] == bp[i] {
			continue
		}
		x, errX := strconv.Atoi(ap[i])
		y, errY := strconv.Atoi(bp[i])
		switch {
		case errX == nil && errY == nil:
			return sign(x - y), true
		case errX == nil: // numeric identifiers come first
			return -1, true
		case errY == nil:
			return 1, true
		}
		return sign(strings.Compare(ap[i], bp[i])), true
	}
	return sign(len(ap) - len(bp)), true
}

// parseVersion splits a release into its numbers and pre-release.
func parseVersion(s string) (nums []int, pre string, ok bool) {
	s = strings.TrimPrefix(s, "v")
	s, _, _ = strings.Cut(s, "+")
	core, pre, _ := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) > 4 {
		return nil, "", false
	}
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || p[0] == '+' {
			return nil, "", false
		}
		nums = append(nums, n)
	}
	return nums, pre, true
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
