package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/localclient"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// doctorAbout is what flyctl doctor --help says it does.
const doctorAbout = `Checks that fly works here, and says for each check what to do when it does
not:

  flyd      a flyd answers on the socket, of this flyctl's protocol and
            release (an older one is still running after an upgrade:
            restart it); the flyd binary flyctl mcp starts is there
  flutter   flutter is found: on PATH (flutter.bat on Windows), which is
            what flyd runs, else in $FLUTTER_ROOT/bin
  flyctl    the flyctl that PATH finds first is this one, not another
            (fly.io's CLI is also named flyctl)
  CLIENT    each MCP client found has a "fly" server (user scope) that
            runs this flyctl
  service   the login service is installed and runs this flyctl's flyd
            (flyctl service status tells more)

It exits 1 when something is wrong (FAIL), 0 when there are only warnings.
--json prints the checks as JSON; its fields may grow but never change
meaning.`

type doctorOptions struct{ json bool }

func (o *doctorOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the checks as JSON")
}

// Statuses of a check.
const (
	checkOK   = "ok"
	checkInfo = "info"
	checkWarn = "warn"
	checkFail = "fail"
)

// doctorCheck is one check of flyctl doctor --json.
type doctorCheck struct {
	Name    string `json:"name"`   // flyd, flyd-binary, flutter, flyctl, client:NAME, service
	Status  string `json:"status"` // ok, info, warn or fail
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"` // what to do
}

// doctorReport is flyctl doctor --json.
type doctorReport struct {
	Flyctl   string        `json:"flyctl"` // this flyctl's path
	Version  string        `json:"version"`
	Protocol int           `json:"protocol"`
	OK       bool          `json:"ok"` // no check failed
	Checks   []doctorCheck `json:"checks"`
}

func (r *doctorReport) add(name, status, msg, fix string) {
	r.Checks = append(r.Checks, doctorCheck{Name: name, Status: status, Message: msg, Fix: fix})
}

func cmdDoctor(ctx context.Context, c *call, o *doctorOptions) error {
	if err := c.noArgs(); err != nil {
		return err
	}
	h := c.machine()
	self, err := selfExecutable(h)
	if err != nil {
		return err
	}
	r := &doctorReport{Flyctl: self, Version: wire.Version, Protocol: wire.Protocol, Checks: []doctorCheck{}}
	svc := c.svc()
	doctorFlyd(ctx, c, r)
	if flyd, where, err := svc.findFlyd(); err != nil {
		r.add("flyd-binary", checkFail, err.Error()+": flyctl mcp cannot start flyd, nor can the service", "install flyd next to this flyctl ("+filepath.Dir(self)+")")
	} else {
		r.add("flyd-binary", checkOK, fmt.Sprintf("flyd is %s (%s flyctl)", flyd, strings.TrimSuffix(where, " flyctl")), "")
	}
	doctorFlutter(c.getenv, r)
	doctorPath(ctx, c, h, self, r)
	doctorClients(c.getenv, self, r)
	doctorService(ctx, c, svc, r)

	failed := 0
	for _, ch := range r.Checks {
		if ch.Status == checkFail {
			failed++
		}
	}
	r.OK = failed == 0
	if o.json {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := writeIndentedJSON(c.stdout, b); err != nil {
			return err
		}
	} else if err := printDoctor(c.stdout, r); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d check(s) failed", failed)
	}
	return nil
}

// printDoctor prints the checks, one line each, with what to do.
func printDoctor(w io.Writer, r *doctorReport) error {
	fmt.Fprintf(w, "flyctl %s (protocol %d) at %s\n", r.Version, r.Protocol, r.Flyctl)
	for _, ch := range r.Checks {
		label := map[string]string{checkOK: "ok", checkInfo: "-", checkWarn: "warn", checkFail: "FAIL"}[ch.Status]
		if _, err := fmt.Fprintf(w, "%-5s %-12s %s\n", label, strings.TrimPrefix(ch.Name, "client:"), ch.Message); err != nil {
			return err
		}
		if ch.Fix != "" {
			fmt.Fprintf(w, "%-5s %-12s fix: %s\n", "", "", ch.Fix)
		}
	}
	return nil
}

// doctorFlyd checks that a flyd answers, and that it is of this protocol
// and release.
func doctorFlyd(ctx context.Context, c *call, r *doctorReport) {
	p, err := paths.Resolve(c.getenv)
	if err != nil {
		r.add("flyd", checkFail, err.Error(), "")
		return
	}
	lc := localclient.New(p.Socket)
	defer lc.CloseIdleConnections()
	var header string
	lc.OnVersion(func(h string) { header = h })
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := lc.Status(ctx)
	switch {
	case errors.Is(err, localclient.ErrNoDaemon):
		fix := "flyctl service start; or any editor's flyctl mcp starts one"
		if c.getenv(paths.EnvSocket) != "" || c.getenv(paths.EnvStateDir) != "" {
			fix = "flyd run (the service serves the default paths, not " + paths.EnvSocket + "'s or " + paths.EnvStateDir + "'s); or any editor's flyctl mcp starts one"
		}
		r.add("flyd", checkWarn, "no flyd answers on "+p.Socket, fix)
		return
	case errors.Is(err, paths.ErrUntrusted):
		r.add("flyd", checkFail, err.Error(), "")
		return
	case err != nil:
		fix := ""
		if strings.Contains(err.Error(), "upgrade flyd") {
			fix = "put this flyctl's flyd in place of the old one, then " + c.restartAdvice(pidOf(ctx, lc))
		}
		r.add("flyd", checkFail, err.Error(), fix)
		return
	}
	version := st.Version
	if v, _, ok := wire.ParseVersionHeader(header); ok {
		version = v
	}
	msg := fmt.Sprintf("flyd %s (protocol %d) answers on %s, pid %d", safetext.Field(version), st.Protocol, p.Socket, st.PID)
	switch cmp, ok := compareVersions(version, wire.Version); {
	case ok && cmp < 0:
		r.add("flyd", checkFail, msg+": older than this flyctl "+wire.Version+" (still running since an upgrade?)", c.restartAdvice(st.PID))
	case ok && cmp > 0:
		r.add("flyd", checkWarn, msg+": newer than this flyctl "+wire.Version, "upgrade flyctl (and the editors' flyctl mcp with it)")
	case !ok && strings.SplitN(version, "+", 2)[0] != wire.Version: // build metadata is not a release
		r.add("flyd", checkWarn, msg+": another release than this flyctl "+wire.Version, "if fly was upgraded: "+c.restartAdvice(st.PID))
	default:
		r.add("flyd", checkOK, msg, "")
	}
}

// pidOf is the pid of the flyd that answers, whatever its protocol, or 0.
func pidOf(ctx context.Context, lc *localclient.Client) int {
	pid, _ := lc.Ping(ctx)
	return pid
}

// doctorFlutter checks that flutter is found, as flyd looks for it: on
// PATH, else in $FLUTTER_ROOT/bin.
func doctorFlutter(getenv func(string) string, r *doctorReport) {
	onPath := findProgram("flutter", getenv)
	root := getenv("FLUTTER_ROOT")
	inRoot := ""
	if root != "" {
		inRoot = findProgramIn("flutter", []string{filepath.Join(root, "bin")}, getenv)
	}
	switch {
	case onPath != "" && inRoot != "" && !sameProgram(onPath, inRoot, getenv):
		r.add("flutter", checkWarn, fmt.Sprintf("%s on PATH, which flyd runs; FLUTTER_ROOT names another SDK (%s)", onPath, root), "unset FLUTTER_ROOT, or put "+filepath.Join(root, "bin")+" first in PATH")
	case onPath != "":
		r.add("flutter", checkOK, onPath+" (on PATH)", "")
	case inRoot != "":
		r.add("flutter", checkOK, inRoot+" (in FLUTTER_ROOT, not on PATH)", "")
	case root != "":
		r.add("flutter", checkFail, "flutter is not on PATH, nor in FLUTTER_ROOT's bin ("+root+")", "set FLUTTER_ROOT to your Flutter SDK, or put its bin directory in PATH")
	default:
		r.add("flutter", checkFail, "flutter is not on PATH and FLUTTER_ROOT is not set", "put your Flutter SDK's bin directory in PATH (flyd runs flutter from the PATH of the editor that asks)")
	}
}

// reFlyioVersion is how fly.io's flyctl prints its version:
// "flyctl v0.3.164 darwin/arm64 Commit: f767253a... BuildDate: 2025-07-30T12:20:14Z".
var reFlyioVersion = regexp.MustCompile(`^(?:flyctl|fly) (v\S+) \S+ Commit: `)

// reFlyVersion is how this project's flyctl prints it:
// "flyctl 1.2.3 (commit abc1234, 2026-11-27; protocol 1)", or of older
// builds "flyctl 0.1.0-dev (protocol 1)".
var reFlyVersion = regexp.MustCompile(`^flyctl (\S+) \((?:[^()]*; )?protocol (\d+)\)`)

// doctorPath checks which flyctl PATH finds first.
func doctorPath(ctx context.Context, c *call, h *host, self string, r *doctorReport) {
	all := findProgramsIn("flyctl", filepath.SplitList(c.getenv("PATH")), c.getenv)
	if len(all) == 0 {
		r.add("flyctl", checkInfo, "flyctl is not on PATH; the clients that setup configured run it by its path", "")
		return
	}
	first := all[0]
	if sameProgram(first, self, c.getenv) {
		r.add("flyctl", checkOK, "PATH finds this flyctl ("+first+")", "")
		return
	}
	which := identifyFlyctl(ctx, h, first, c.getenv)
	fix := "put " + filepath.Dir(self) + " before " + filepath.Dir(first) + " in PATH, or run this flyctl by its path"
	r.add("flyctl", checkWarn, fmt.Sprintf("PATH finds %s first, %s: a config that runs \"flyctl\" by name gets that one (setup writes this flyctl's path)", first, which), fix)
}

// identifyFlyctl says which flyctl path is, from what its version command
// prints.
func identifyFlyctl(ctx context.Context, h *host, path string, getenv func(string) string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stdout, _, err := h.run(ctx, []string{path, "version"}, programEnv(getenv))
	line, _, _ := strings.Cut(strings.TrimSpace(string(stdout)), "\n")
	switch m := reFlyioVersion.FindStringSubmatch(line); {
	case m != nil:
		return "fly.io's flyctl " + safetext.Field(m[1])
	case err != nil:
		return "which does not run (" + err.Error() + ")"
	}
	if m := reFlyVersion.FindStringSubmatch(line); m != nil {
		return "another copy of this project's flyctl, " + safetext.Field(m[1])
	}
	return "another program (its version says " + safetext.Field(line) + ")"
}

// doctorClients checks that each client found has a "fly" server that runs
// this flyctl.
func doctorClients(getenv func(string) string, self string, r *doctorReport) {
	var absent []string
	for _, uc := range userClients {
		st := uc.inspect(getenv)
		name := "client:" + uc.name
		if !st.present {
			absent = append(absent, uc.name)
			continue
		}
		if st.err != nil {
			r.add(name, checkFail, st.err.Error(), "fix the file, then run flyctl setup --client "+uc.name)
			continue
		}
		s, ok := st.servers[serverName]
		if !ok {
			r.add(name, checkWarn, fmt.Sprintf("%s has no %q server (%s)", uc.title, serverName, st.file), "flyctl setup --client "+uc.name)
			continue
		}
		if _, ours := flyctlEntry(s); !ours {
			r.add(name, checkWarn, fmt.Sprintf("%s's %q server is not flyctl mcp: %s (%s)", uc.title, serverName, safetext.Field(strings.Join(append([]string{s.Command}, s.Args...), " ")), st.file), "")
			continue
		}
		switch {
		case sameProgram(s.Command, self, getenv):
			r.add(name, checkOK, fmt.Sprintf("%s's %q runs this flyctl (%s)", uc.title, serverName, st.file), "")
		case !filepath.IsAbs(s.Command) && findProgram(s.Command, getenv) == "":
			r.add(name, checkFail, fmt.Sprintf("%s's %q runs %q, which is not on PATH (%s)", uc.title, serverName, s.Command, st.file), "flyctl setup --client "+uc.name)
		case filepath.IsAbs(s.Command) && !exists(s.Command):
			r.add(name, checkFail, fmt.Sprintf("%s's %q runs %s, which does not exist (%s)", uc.title, serverName, s.Command, st.file), "flyctl setup --client "+uc.name)
		default:
			r.add(name, checkFail, fmt.Sprintf("%s's %q runs %s, not this flyctl (%s)", uc.title, serverName, safetext.Field(s.Command), st.file), "flyctl setup --client "+uc.name)
		}
	}
	if len(absent) > 0 {
		r.add("clients", checkInfo, "not found here: "+strings.Join(absent, ", "), "")
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// doctorService checks the login service, as flyctl service status does.
func doctorService(ctx context.Context, c *call, svc *serviceCmd, r *doctorReport) {
	st, err := serviceState(ctx, svc)
	switch {
	case err != nil:
		r.add("service", checkInfo, err.Error(), "")
		return
	case !st.Installed:
		r.add("service", checkWarn, "not installed ("+st.Unit+"): flyd starts when an editor connects, not at login", "flyctl service install")
		return
	case st.Flyd != "" && !exists(st.Flyd):
		r.add("service", checkFail, "it runs "+st.Flyd+", which is gone", "flyctl service install --force")
		return
	case !serviceCurrent(st):
		r.add("service", checkFail, fmt.Sprintf("it runs %s, not this flyctl's flyd %s", st.Flyd, st.CurrentFlyd), "flyctl service install --force")
		return
	case st.State == "failed" || st.State == "restarting":
		r.add("service", checkFail, fmt.Sprintf("installed (%s), %s", st.Unit, st.State), "see its log: "+st.Log)
		return
	}
	r.add("service", checkOK, fmt.Sprintf("installed (%s), %s", st.Unit, st.State), "")
	if st.Manager != "Run key" && st.Path != st.CurrentPath {
		r.add("service", checkWarn, "its PATH is not this shell's, so flyd may find another flutter", "flyctl service install --force (restarts flyd)")
	}
}
