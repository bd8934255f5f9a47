package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/kardianos/service"
	"github.com/spf13/pflag"
)

// serviceAbout is what flyctl service --help says it does; the page
// lists the verbs after it.
const serviceAbout = `Runs flyd as a service of your user, so that it starts at login and restarts
when it fails: a systemd user unit on Linux, a launchd agent on macOS. The
service runs "flyd run" (the flyd next to flyctl, else the one on PATH) with
your PATH baked in, so that it finds flutter. No root is needed.`

// serviceInstallAbout is what flyctl service install --help says it does.
const serviceInstallAbout = `Installs flyd as a service of your user and starts it; from then on it starts
at every login and is restarted when it fails. The service runs "flyd run"
with the flyd next to flyctl (else the one on PATH), and with these variables
baked in when set: PATH, FLUTTER_ROOT, ANDROID_HOME, ANDROID_SDK_ROOT,
JAVA_HOME, PUB_CACHE, FLY_SOCKET, FLY_STATE_DIR.

  Linux:  ~/.config/systemd/user/flyd.service (a systemd user unit; logs in
          the journal)
  macOS:  ~/Library/LaunchAgents/dev.fly.flyd.plist (a launchd agent; logs
          in ~/Library/Logs/fly/flyd.log)

An existing unit is only replaced with --force: run that after moving flyd or
changing your PATH. It refuses to run as root, which would install flyd for
root rather than for you, unless given --allow-root.`

// What flyctl service uninstall, start, stop and restart --help say they do.
const (
	serviceUninstallAbout = `Stops flyd and removes its unit, so it no longer starts at login. Doing so
when nothing is installed is not an error.`
	serviceStartAbout   = "Starts the installed flyd service now."
	serviceStopAbout    = "Stops the flyd service; it starts again at the next login, or with\nflyctl service start. Runs that flyd owns are stopped with it."
	serviceRestartAbout = "Stops and starts the flyd service, e.g. after upgrading flyd. Runs\nthat flyd owns are stopped."
)

// serviceStatusAbout is what flyctl service status --help says it does.
const serviceStatusAbout = `Shows whether the flyd service is installed and running, the flyd binary and
PATH its unit holds, and where its log is. It warns on stderr when they are
not what install would write now, and on Linux when the service stops at
logout because lingering is off. It exits 0 whatever the state; scripts read
--json.`

// serviceReadyTimeout is how long start, restart and install wait for a started
// flyd to answer on its socket.
const serviceReadyTimeout = 10 * time.Second

// serviceCmd is "flyctl service". Its fields are what it needs from the
// machine; newServiceCmd fills them with the real ones and tests with
// fakes.
type serviceCmd struct {
	goos       string
	getenv     func(string) string
	geteuid    func() int
	executable func() (string, error)                                                          // flyctl's own binary
	connect    func(context.Context, servicePlatform, *service.Config) (serviceManager, error) // the OS service manager
	linger     func(ctx context.Context, user string) (bool, error)                            // nil: not asked
	ping       func(context.Context) (pid int, err error)                                      // nil: not asked
	stdout     io.Writer
	stderr     io.Writer
}

// newServiceCmd is flyctl service on this machine, for the call c.
func newServiceCmd(c *call) *serviceCmd {
	return &serviceCmd{
		goos:       runtime.GOOS,
		getenv:     c.getenv,
		geteuid:    os.Geteuid,
		executable: os.Executable,
		connect:    connectManager,
		linger:     lingerEnabled,
		ping:       pingDaemon(c.getenv),
		stdout:     c.stdout,
		stderr:     c.stderr,
	}
}

// run runs "flyctl service args..." on c's machine, fakes included.
func (c *serviceCmd) run(ctx context.Context, args []string) error {
	cl := &call{getenv: c.getenv, stdin: strings.NewReader(""), stdout: c.stdout, stderr: c.stderr, service: c}
	return dispatch(ctx, cl, commands().verb("service"), args)
}

// serviceVerb is the handler of a verb of flyctl service: a method of
// the serviceCmd the call acts on.
func serviceVerb[O any, P options[O]](m func(*serviceCmd, context.Context, *call, P) error) handler {
	return handle(func(ctx context.Context, c *call, o P) error {
		if err := c.noArgs(); err != nil {
			return err
		}
		s := c.service
		if s == nil {
			s = newServiceCmd(c)
		}
		return m(s, ctx, c, o)
	})
}

func (c *serviceCmd) platform() (servicePlatform, error) {
	return platformFor(c.goos, c.getenv("HOME"))
}

// config is kardianos/service's description of the service; unit is the
// rendered unit text, which kardianos writes as it is.
func (c *serviceCmd) config(p servicePlatform, spec unitSpec, unit string) *service.Config {
	opts := service.KeyValue{"UserService": true}
	if unit != "" {
		opts[p.option] = unit
	}
	if p.goos == "darwin" {
		opts["RunAtLoad"] = true
		opts["KeepAlive"] = true
	}
	return &service.Config{
		Name:        p.name,
		DisplayName: "flyd",
		Description: "flyd, the per-user fly daemon shared by Flutter MCP clients",
		Executable:  spec.Flyd,
		Arguments:   []string{"run"},
		Option:      opts,
	}
}

// findFlyd returns the flyd binary the service should run, and where it
// was found: next to flyctl's binary (as invoked, then with symlinks
// resolved, the order the shim uses) or else on PATH.
func (c *serviceCmd) findFlyd() (path, where string, err error) {
	if exe, err := c.executable(); err == nil {
		dirs := []string{filepath.Dir(exe)}
		if real, err := filepath.EvalSymlinks(exe); err == nil && filepath.Dir(real) != dirs[0] {
			dirs = append(dirs, filepath.Dir(real))
		}
		for _, d := range dirs {
			if p := filepath.Join(d, "flyd"); checkExecutable(p) == nil {
				p, err := filepath.Abs(p)
				return p, "next to", err
			}
		}
	}
	for _, d := range filepath.SplitList(c.getenv("PATH")) {
		if !filepath.IsAbs(d) {
			continue
		}
		if p := filepath.Join(d, "flyd"); checkExecutable(p) == nil {
			return p, "on PATH", nil
		}
	}
	return "", "", errors.New("no flyd binary next to flyctl or on PATH; put flyd in the same directory as flyctl")
}

// checkRoot refuses to install for root unless allowed: flyd is a
// per-user daemon, and as root (or under sudo) the service would belong
// to root rather than to the user who runs the editor.
func (c *serviceCmd) checkRoot(allowRoot bool) error {
	if allowRoot || c.geteuid() != 0 {
		return nil
	}
	if uid := c.getenv("SUDO_UID"); uid != "" {
		return fmt.Errorf("refusing to install under sudo: that would install flyd as a service of root, not of the user who ran sudo (uid %s); run it as yourself: flyctl service install (or pass --allow-root to install it for root)", uid)
	}
	return errors.New("refusing to install as root: flyd is a per-user daemon and would run as root; run this as the user who runs the editor, or pass --allow-root (e.g. in a container)")
}

func unitExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (c *serviceCmd) warnf(format string, args ...any) {
	fmt.Fprintf(c.stderr, "flyctl: warning: "+format+"\n", args...)
}

type serviceInstallOptions struct{ force, allowRoot, dryRun bool }

func (o *serviceInstallOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.force, "force", false, "replace an existing unit")
	fs.BoolVar(&o.allowRoot, "allow-root", false, "install even when running as root")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the unit and where it would go; change nothing")
}

func (c *serviceCmd) install(ctx context.Context, _ *call, o *serviceInstallOptions) error {
	if err := c.checkRoot(o.allowRoot); err != nil {
		return err
	}
	p, err := c.platform()
	if err != nil {
		return err
	}
	flyd, _, err := c.findFlyd()
	if err != nil {
		return err
	}
	spec := unitSpec{Flyd: flyd, Env: bakeEnv(c.getenv), Log: p.log}
	if c.getenv("PATH") == "" {
		c.warnf("PATH is empty, so the service gets %s's default PATH, where flutter may not be", p.manager)
	}
	unit, err := renderUnit(p, spec)
	if err != nil {
		return err
	}
	if strings.Contains(unit, "{{") {
		// kardianos/service renders the unit as a template of its own.
		return errors.New(`cannot install: a path or variable contains "{{"`)
	}
	installed, err := unitExists(p.file)
	if err != nil {
		return err
	}
	if o.dryRun {
		fmt.Fprintf(c.stderr, "flyctl: would write %s:\n", p.file)
		if installed && !o.force {
			fmt.Fprintf(c.stderr, "flyctl: (it exists: install needs --force to replace it)\n")
		}
		_, err := io.WriteString(c.stdout, unit)
		return err
	}
	if installed && !o.force {
		return fmt.Errorf("the flyd service is already installed (%s); replace it with: flyctl service install --force", p.file)
	}

	m, err := c.connect(ctx, p, c.config(p, spec, unit))
	if err != nil {
		return err
	}
	wasRunning := false
	if installed {
		st, _ := m.Status()
		wasRunning = st == service.StatusRunning
		// kardianos/service refuses to write over a unit.
		if err := os.Remove(p.file); err != nil {
			return fmt.Errorf("replace %s: %w", p.file, err)
		}
	}
	if p.log != "" {
		if err := os.MkdirAll(filepath.Dir(p.log), 0o700); err != nil {
			return fmt.Errorf("create the log directory: %w", err)
		}
	}
	if err := m.Install(); err != nil {
		return fmt.Errorf("install %s: %w", p.file, err)
	}
	if ok, _ := unitExists(p.file); !ok {
		// kardianos/service asks the OS for the home directory.
		return fmt.Errorf("the service manager did not write %s; is HOME (%s) your home directory?", p.file, c.getenv("HOME"))
	}
	fmt.Fprintf(c.stdout, "installed %s (runs %s run)\n", p.file, flyd)
	if wasRunning {
		if err := m.Restart(); err != nil {
			return fmt.Errorf("restart the flyd service: %w; see its log: %s", err, p.logHint)
		}
		fmt.Fprintln(c.stdout, "restarted flyd with the new unit")
	} else {
		if err := c.checkForeign(ctx); err != nil {
			return fmt.Errorf("the service is installed but not started: %w", err)
		}
		if err := m.Start(); err != nil {
			return fmt.Errorf("start the flyd service: %w; see its log: %s", err, p.logHint)
		}
		fmt.Fprintln(c.stdout, "started flyd; it starts at every login from now on")
	}
	c.warnLinger(ctx, p, nil)
	return c.waitReady(ctx, p)
}

func (c *serviceCmd) uninstall(ctx context.Context, _ *call, _ *noFlags) error {
	p, err := c.platform()
	if err != nil {
		return err
	}
	installed, err := unitExists(p.file)
	if err != nil {
		return err
	}
	if !installed {
		fmt.Fprintf(c.stderr, "flyctl: the flyd service is not installed (no %s); nothing to do\n", p.file)
		return nil
	}
	m, err := c.connect(ctx, p, c.config(p, unitSpec{}, ""))
	if err != nil {
		return fmt.Errorf("%w; or remove the unit by hand: rm %s", err, p.file)
	}
	if st, _ := m.Status(); st == service.StatusRunning {
		if err := m.Stop(); err != nil {
			return fmt.Errorf("stop the flyd service: %w", err)
		}
	}
	if err := m.Uninstall(); err != nil {
		return fmt.Errorf("uninstall %s: %w", p.file, err)
	}
	if err := os.Remove(p.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fmt.Fprintf(c.stdout, "stopped flyd and removed %s\n", p.file)
	return nil
}

// control is start, stop and restart.
func (c *serviceCmd) control(ctx context.Context, cl *call, _ *noFlags) error {
	verb := cl.cmd.name
	p, err := c.platform()
	if err != nil {
		return err
	}
	installed, err := unitExists(p.file)
	if err != nil {
		return err
	}
	if !installed {
		return errors.New("the flyd service is not installed; install it with: flyctl service install")
	}
	m, err := c.connect(ctx, p, c.config(p, unitSpec{}, ""))
	if err != nil {
		return err
	}
	st, _ := m.Status()
	running := st == service.StatusRunning
	switch {
	case verb == "start" && running:
		fmt.Fprintln(c.stdout, "the flyd service is already running")
		return nil
	case verb == "stop" && !running:
		fmt.Fprintln(c.stdout, "the flyd service is not running")
		return nil
	case verb == "stop":
		if err := m.Stop(); err != nil {
			return fmt.Errorf("stop the flyd service: %w", err)
		}
		fmt.Fprintln(c.stdout, "stopped flyd; it starts again at the next login, or with: flyctl service start")
		return nil
	case verb == "restart" && running:
		if err := m.Restart(); err != nil {
			return fmt.Errorf("restart the flyd service: %w; see its log: %s", err, p.logHint)
		}
		fmt.Fprintln(c.stdout, "restarted flyd")
	default: // start, or restart of a stopped service
		if err := c.checkForeign(ctx); err != nil {
			return err
		}
		if err := m.Start(); err != nil {
			return fmt.Errorf("start the flyd service: %w; see its log: %s", err, p.logHint)
		}
		fmt.Fprintln(c.stdout, "started flyd")
	}
	return c.waitReady(ctx, p)
}

// checkForeign fails when a flyd that the service did not start already
// answers, such as one the shim started: the service's flyd would find it
// holding the lock, exit, and be restarted until systemd gives up. It is
// not stopped here, since that would stop the runs it owns.
func (c *serviceCmd) checkForeign(ctx context.Context) error {
	if c.ping == nil {
		return nil
	}
	if pid, err := c.ping(ctx); err == nil {
		return fmt.Errorf("a flyd the service did not start is running (pid %d); stop it (kill %d; its runs stop too), then run: flyctl service start", pid, pid)
	}
	return nil
}

// waitReady waits until flyd answers on its socket.
func (c *serviceCmd) waitReady(ctx context.Context, p servicePlatform) error {
	if c.ping == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, serviceReadyTimeout)
	defer cancel()
	for {
		_, err := c.ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the service started, but flyd did not answer within %s; see its log: %s", serviceReadyTimeout, p.logHint)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// warnLinger warns, on Linux, that the user manager and with it the
// service stop at logout unless lingering is on. It records what it found
// in st when st is not nil.
func (c *serviceCmd) warnLinger(ctx context.Context, p servicePlatform, st *serviceStatus) {
	if p.goos != "linux" || c.linger == nil {
		return
	}
	on, err := c.linger(ctx, loginName(c.getenv))
	if err != nil {
		return
	}
	if st != nil {
		st.Linger = &on
	}
	if !on {
		msg := "the service stops when you log out; enable it with: loginctl enable-linger $USER"
		c.warnf("%s", msg)
		if st != nil {
			st.Warnings = append(st.Warnings, msg)
		}
	}
}

// serviceStatus is "flyctl service status --json". Fields may be added,
// never change meaning.
type serviceStatus struct {
	Manager     string   `json:"manager"`   // systemd or launchd
	Unit        string   `json:"unit"`      // the unit file
	Installed   bool     `json:"installed"` // the unit file exists
	State       string   `json:"state"`     // running, stopped, restarting, failed, not installed or unknown
	Running     bool     `json:"running"`
	Flyd        string   `json:"flyd,omitempty"` // the binary the unit runs
	Args        []string `json:"args,omitempty"` // and its arguments
	Path        string   `json:"path,omitempty"` // the PATH the unit holds
	CurrentFlyd string   `json:"current_flyd,omitempty"`
	CurrentPath string   `json:"current_path"`
	Linger      *bool    `json:"linger,omitempty"` // Linux: the service outlives logout
	Log         string   `json:"log"`              // where flyd's log is, or how to read it
	Warnings    []string `json:"warnings"`
}

type serviceStatusOptions struct{ json bool }

func (o *serviceStatusOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the status as JSON")
}

func (c *serviceCmd) status(ctx context.Context, _ *call, o *serviceStatusOptions) error {
	p, err := c.platform()
	if err != nil {
		return err
	}
	st := serviceStatus{
		Manager:     p.manager,
		Unit:        p.file,
		State:       "not installed",
		CurrentPath: c.getenv("PATH"),
		Log:         p.logHint,
		Warnings:    []string{},
	}
	warn := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		st.Warnings = append(st.Warnings, msg)
		c.warnf("%s", msg)
	}
	cur, where, curErr := c.findFlyd()
	st.CurrentFlyd = cur
	data, err := os.ReadFile(p.file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read the unit: %w", err)
	default:
		st.Installed = true
		st.State = "unknown"
		if m, err := c.connect(ctx, p, c.config(p, unitSpec{}, "")); err != nil {
			warn("%v", err)
		} else {
			switch s, err := m.Status(); {
			case errors.Is(err, errRestarting):
				st.State = "restarting"
				warn("%v; see its log: %s", err, p.logHint)
			case s == service.StatusRunning:
				st.State, st.Running = "running", true
			case s == service.StatusStopped:
				st.State = "stopped"
			case err != nil && strings.Contains(err.Error(), "failed state"):
				st.State = "failed"
				warn("the service failed; see its log: %s", p.logHint)
			case err != nil:
				warn("ask %s: %v", p.manager, err)
			}
		}
		info, err := parseUnit(p, data)
		if err != nil {
			warn("cannot read %s: %v", p.file, err)
			break
		}
		st.Flyd, st.Args, st.Path = info.Flyd, info.Args, info.Env["PATH"]
		switch {
		case checkExecutable(info.Flyd) != nil && curErr == nil:
			warn("the service runs %s, which is gone; this flyctl is %s %s: run flyctl service install --force", info.Flyd, where, cur)
		case checkExecutable(info.Flyd) != nil:
			warn("the service runs %s, which is gone: reinstall flyd next to flyctl, then run flyctl service install --force", info.Flyd)
		case curErr == nil && filepath.Clean(info.Flyd) != cur:
			warn("the service runs %s; this flyctl is %s %s: run flyctl service install --force", info.Flyd, where, cur)
		}
		if st.Path != st.CurrentPath {
			warn("the service's PATH differs from yours, so it may find another flutter: run flyctl service install --force\n  service: %s\n  yours:   %s", st.Path, st.CurrentPath)
		}
		c.warnLinger(ctx, p, &st)
	}

	if o.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	if !st.Installed {
		fmt.Fprintf(c.stdout, "flyd service: not installed (%s)\n", p.file)
		fmt.Fprintln(c.stderr, "flyctl: install it with: flyctl service install")
		return nil
	}
	fmt.Fprintf(c.stdout, "flyd service: %s\n", st.State)
	fmt.Fprintf(c.stdout, "unit:  %s (%s)\n", st.Unit, st.Manager)
	if st.Flyd != "" {
		fmt.Fprintf(c.stdout, "runs:  %s\n", strings.Join(append([]string{st.Flyd}, st.Args...), " "))
		fmt.Fprintf(c.stdout, "PATH:  %s\n", st.Path)
	}
	fmt.Fprintf(c.stdout, "logs:  %s\n", st.Log)
	return nil
}
