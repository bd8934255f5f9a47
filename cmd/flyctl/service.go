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

	"github.com/fly-dev/fly/internal/paths"
	"github.com/kardianos/service"
	"github.com/spf13/pflag"
)

// serviceAbout is what flyctl service --help says it does; the page
// lists the verbs after it.
const serviceAbout = `Runs flyd as a service of your user, so that it starts at login and restarts
when it fails: a systemd user unit on Linux, a launchd agent on macOS. The
service runs "flyd run" (the flyd next to flyctl, else the one on PATH) with
your PATH baked in, so that it finds flutter. No root is needed.

On Windows it is a start at logon in your user's Run key, not a Windows
service: a service would need an administrator and would run in session 0,
where the windows of the apps flyd runs (flutter run -d windows) are never
seen. See flyctl service install --help.`

// serviceInstallAbout is what flyctl service install --help says it does.
const serviceInstallAbout = `Installs flyd as a service of your user and starts it; from then on it starts
at every login and is restarted when it fails. The service runs "flyd run"
with the flyd next to flyctl (else the one on PATH), and with these variables
baked in when set: PATH, FLUTTER_ROOT, ANDROID_HOME, ANDROID_SDK_ROOT,
JAVA_HOME, PUB_CACHE, FLY_SOCKET, FLY_STATE_DIR.

  Linux:   ~/.config/systemd/user/flyd.service (a systemd user unit; logs in
           the journal)
  package: when flyd is a distro package's (fly's deb or rpm install
           /usr/bin/flyd and /usr/lib/systemd/user/flyd.service), install
           writes no unit and bakes in nothing: it enables the package's
           (systemctl --user enable --now flyd), so that removing the
           package stops flyd and leaves no unit behind
  macOS:   ~/Library/LaunchAgents/dev.fly.flyd.plist (a launchd agent; logs
           in ~/Library/Logs/fly/flyd.log)
  Windows: HKCU\Software\Microsoft\Windows\CurrentVersion\Run, value "fly"
           (runs "flyd.exe" run --no-console at logon; logs in flyd.log in
           the state directory, %LOCALAPPDATA%\fly)

An existing unit is only replaced with --force: run that after moving flyd or
changing your PATH, or to swap a unit of your own for the package's. It
refuses to run as root, which would install flyd for root rather than for
you, unless given --allow-root.

On Windows nothing restarts flyd when it fails, and nothing is baked in: a
Run key value is a command line, run at logon with your session's
environment (set FLY_SOCKET or FLY_STATE_DIR for good with setx). The Run
key needs no administrator and no Task Scheduler, and runs flyd in your own
session, where the apps it runs show their windows. What restarts a flyd
that failed is flyctl mcp: it starts one whenever an editor connects and
none answers. --no-console closes the console window that Windows opens
for flyd at logon.`

// What flyctl service uninstall, start, stop and restart --help say they do.
const (
	serviceUninstallAbout = `Stops flyd and removes its unit, so it no longer starts at login; a distro
package's unit is disabled instead (systemctl --user disable --now flyd),
and stays installed for other users. Doing so when nothing is installed is
not an error. On Windows, flyd is ended at once (Windows has no request to
stop that it could answer first).`
	serviceStartAbout   = "Starts the installed flyd service now."
	serviceStopAbout    = "Stops the flyd service; it starts again at the next login, or with\nflyctl service start. Runs that flyd owns are stopped with it."
	serviceRestartAbout = "Stops and starts the flyd service, e.g. after upgrading flyd. Runs\nthat flyd owns are stopped."
)

// serviceStatusAbout is what flyctl service status --help says it does.
const serviceStatusAbout = `Shows whether the flyd service is installed and running, the flyd binary and
PATH its unit holds, and where its log is. It warns on stderr when they are
not what install would write now, and on Linux when the service stops at
logout because lingering is off. On Windows it shows the Run key value and
whether a flyd answers, and warns when Windows has the start at logon
turned off (Task Manager's startup apps). It exits 0 whatever the state;
scripts read --json.`

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
	enabled    func(ctx context.Context, p servicePlatform) (bool, error)                      // whether systemd starts p's unit at login; nil: not asked
	ping       func(context.Context) (pid int, err error)                                      // nil: not asked
	stdout     io.Writer
	stderr     io.Writer

	// packagedUnit is the unit file a distro package installs for every
	// user ("" to look for none); see service_packaged.go.
	packagedUnit string

	// What the Run key platform (Windows) uses in place of a service
	// manager; see runKeyManager.
	runKey    runKey                                                               // HKCU's Run key
	startFlyd func(argv, env []string, log string) error                           // starts flyd detached, its output appended to log
	endFlyd   func(ctx context.Context, getenv func(string) string, pid int) error // asks flyd pid to stop (else ends it), once sure it is flyd, and waits for its end
}

// newServiceCmd is flyctl service on this machine, for the call c.
func newServiceCmd(c *call) *serviceCmd {
	s := &serviceCmd{
		goos:         runtime.GOOS,
		getenv:       c.getenv,
		geteuid:      os.Geteuid,
		executable:   os.Executable,
		linger:       lingerEnabled,
		enabled:      systemdEnabled,
		ping:         pingDaemon(c.getenv),
		stdout:       c.stdout,
		stderr:       c.stderr,
		packagedUnit: packagedUnitFile,
		runKey:       newRunKey(),
		startFlyd:    startDetachedFlyd,
		endFlyd:      endFlyd,
	}
	s.connect = s.connectSystem
	return s
}

// connectSystem is the real connect: kardianos/service's manager for
// systemd and launchd, the Run key manager on Windows.
func (c *serviceCmd) connectSystem(ctx context.Context, p servicePlatform, cfg *service.Config) (serviceManager, error) {
	if p.runKey {
		return c.runKeyManager(p, cfg)
	}
	return connectManager(ctx, p, cfg)
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
	p, err := platformFor(c.goos, c.getenv(homeVar(c.goos)))
	if err != nil || !p.runKey {
		return p, err
	}
	// flyd started at logon logs to flyd.log in its state directory.
	fp, err := paths.Resolve(c.getenv)
	if err != nil {
		return servicePlatform{}, err
	}
	p.log, p.logHint = fp.Log(), fp.Log()
	return p, nil
}

// unitExists reports whether flyd's service is installed: p's unit, or
// on Linux the package's unit, enabled (inEffect).
func (c *serviceCmd) unitExists(p servicePlatform) (bool, error) {
	_, ok, err := c.inEffect(context.Background(), p)
	return ok, err
}

// ownUnitExists reports whether p's unit is installed: the file, or the
// Run key value.
func (c *serviceCmd) ownUnitExists(p servicePlatform) (bool, error) {
	if !p.runKey {
		return unitExists(p.file)
	}
	_, err := c.readUnit(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// readUnit reads p's unit; its error wraps fs.ErrNotExist when there is
// none.
func (c *serviceCmd) readUnit(p servicePlatform) ([]byte, error) {
	if !p.runKey {
		return os.ReadFile(p.file)
	}
	if c.runKey == nil {
		return nil, errNoRunKey
	}
	v, err := c.runKey.get(p.name)
	return []byte(v), err
}

// removeUnit removes p's unit; one that is not there is not an error.
func (c *serviceCmd) removeUnit(p servicePlatform) error {
	if !p.runKey {
		if err := os.Remove(p.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if c.runKey == nil {
		return errNoRunKey
	}
	return c.runKey.remove(p.name)
}

// errNoRunKey is the Run key platform's error on a serviceCmd without
// the Run key.
var errNoRunKey = errors.New("flyctl service has no Run key to use here")

// config is kardianos/service's description of the service; unit is the
// rendered unit text, which kardianos writes as it is.
func (c *serviceCmd) config(p servicePlatform, spec unitSpec, unit string) *service.Config {
	opts := service.KeyValue{"UserService": true}
	if unit != "" {
		opts[p.option] = unit
	}
	if p.goos == "darwin" {
		opts["RunAtLoad"] = true
		opts["KeepAlive"] = true // kardianos's template only; ours restarts on failure alone
	}
	return &service.Config{
		Name:        p.name,
		DisplayName: "flyd",
		Description: "flyd, the per-user fly daemon shared by Flutter MCP clients",
		Executable:  spec.Flyd,
		Arguments:   p.args,
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
			if p := filepath.Join(d, flydExe); checkExecutable(p) == nil {
				p, err := filepath.Abs(p)
				return p, "next to", err
			}
		}
	}
	for _, d := range filepath.SplitList(c.getenv("PATH")) {
		if !filepath.IsAbs(d) {
			continue
		}
		if p := filepath.Join(d, flydExe); checkExecutable(p) == nil {
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
	if t := c.target(p, flyd); t.packaged {
		return c.installPackaged(ctx, p, t, flyd, o)
	}
	spec := unitSpec{Flyd: flyd, Log: p.log}
	switch {
	case p.runKey:
		// A Run key value is a command line: it holds no environment.
		for _, v := range []string{paths.EnvSocket, paths.EnvStateDir} {
			if c.getenv(v) != "" {
				c.warnf("%s is set here, but flyd started at logon gets your Windows session's environment: set it there with setx %s VALUE, or flyd listens elsewhere at the next logon", v, v)
			}
		}
	default:
		spec.Env = bakeEnv(c.getenv)
		if c.getenv("PATH") == "" {
			c.warnf("PATH is empty, so the service gets %s's default PATH, where flutter may not be", p.manager)
		}
	}
	unit, err := renderUnit(p, spec)
	if err != nil {
		return err
	}
	if !p.runKey && strings.Contains(unit, "{{") {
		// kardianos/service renders the unit as a template of its own.
		return errors.New(`cannot install: a path or variable contains "{{"`)
	}
	installed, err := c.ownUnitExists(p)
	if err != nil {
		return err
	}
	// The package's unit, enabled, runs another flyd (see target): --force
	// disables it for the user's own. An error asking is connect's to
	// report, with its hint.
	pp, packagedOn, _ := c.inEffect(ctx, p)
	packagedOn = packagedOn && pp.packaged
	if o.dryRun {
		fmt.Fprintf(c.stderr, "flyctl: would write %s:\n", p.file)
		switch {
		case installed && !o.force:
			fmt.Fprintf(c.stderr, "flyctl: (it exists: install needs --force to replace it)\n")
		case packagedOn && !o.force:
			fmt.Fprintf(c.stderr, "flyctl: (the package's unit %s is enabled: install needs --force to disable it for yours)\n", pp.file)
		case packagedOn:
			fmt.Fprintf(c.stderr, "flyctl: (and disable the package's unit %s, which yours replaces)\n", pp.file)
		}
		if p.runKey {
			unit += "\n"
		}
		_, err := io.WriteString(c.stdout, unit)
		return err
	}
	if installed && !o.force {
		return fmt.Errorf("the flyd service is already installed (%s); replace it with: flyctl service install --force", p.file)
	}
	if packagedOn && !o.force {
		return fmt.Errorf("the flyd service is already installed (%s, the package's unit, enabled); replace it with your own unit, which runs %s: flyctl service install --force", pp.file, flyd)
	}
	if packagedOn {
		if err := c.disablePackaged(ctx, pp); err != nil {
			return fmt.Errorf("replace the package's unit with your own: %w", err)
		}
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
		if err := c.removeUnit(p); err != nil {
			return fmt.Errorf("replace %s: %w", p.file, err)
		}
	}
	if p.log != "" && !p.runKey { // the Run key manager makes the state directory, private
		if err := os.MkdirAll(filepath.Dir(p.log), 0o700); err != nil {
			return fmt.Errorf("create the log directory: %w", err)
		}
	}
	if err := m.Install(); err != nil {
		return fmt.Errorf("install %s: %w", p.file, err)
	}
	if ok, _ := c.ownUnitExists(p); !ok {
		// kardianos/service asks the OS for the home directory.
		v := homeVar(c.goos)
		return fmt.Errorf("the service manager did not write %s; is %s (%s) your home directory?", p.file, v, c.getenv(v))
	}
	runs := strings.Join(append([]string{flyd}, p.args...), " ")
	if p.runKey {
		runs = unit // the command line, quoted as Windows reads it
	}
	fmt.Fprintf(c.stdout, "installed %s (runs %s)\n", p.file, runs)
	if packagedOn {
		fmt.Fprintf(c.stdout, "disabled the package's unit %s, which yours replaces\n", pp.file)
		c.warnEnabledForAll(ctx, pp)
	}
	c.warnDisabled(p, nil)
	switch {
	case wasRunning:
		if err := m.Restart(); err != nil {
			return fmt.Errorf("restart the flyd service: %w; see its log: %s", err, p.logHint)
		}
		fmt.Fprintln(c.stdout, "restarted flyd with the new unit")
	case c.runningUnsupervised(p, m):
		fmt.Fprintln(c.stdout, "flyd is already running; it starts at every login from now on")
	default:
		if err := c.checkForeign(ctx, p); err != nil {
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
	eff, installed, err := c.inEffect(ctx, p)
	if err != nil {
		return err
	}
	if !installed {
		if pp, ok := c.packagedPlatform(p); ok {
			fmt.Fprintf(c.stderr, "flyctl: the flyd service is not installed (no %s, and the package's %s is not enabled); nothing to do\n", p.file, pp.file)
		} else {
			fmt.Fprintf(c.stderr, "flyctl: the flyd service is not installed (no %s); nothing to do\n", p.file)
		}
		return nil
	}
	if !eff.packaged {
		if _, err := c.removeOwn(ctx, p); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "stopped flyd and removed %s\n", p.file)
		// Without the user's own unit, the package's runs at the next
		// login if it is enabled too.
		if eff, installed, err = c.inEffect(ctx, p); err != nil || !installed {
			return nil
		}
	}
	if err := c.disablePackaged(ctx, eff); err != nil {
		return fmt.Errorf("%w; or by hand: %s", err, eff.remove)
	}
	fmt.Fprintf(c.stdout, "stopped flyd and disabled %s, the package's unit (it stays installed, for other users)\n", eff.file)
	c.warnEnabledForAll(ctx, eff)
	return nil
}

// control is start, stop and restart.
func (c *serviceCmd) control(ctx context.Context, cl *call, _ *noFlags) error {
	verb := cl.cmd.name
	p, err := c.platform()
	if err != nil {
		return err
	}
	p, installed, err := c.inEffect(ctx, p)
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
		if err := c.checkForeign(ctx, p); err != nil {
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
// not stopped here, since that would stop the runs it owns. The Run key
// supervises nothing: any flyd that answers is as good as its own.
func (c *serviceCmd) checkForeign(ctx context.Context, p servicePlatform) error {
	if c.ping == nil || p.runKey {
		return nil
	}
	if pid, err := c.ping(ctx); err == nil {
		return fmt.Errorf("a flyd the service did not start is running (pid %d); stop it (kill %d; its runs stop too), then run: flyctl service start", pid, pid)
	}
	return nil
}

// runningUnsupervised reports whether p is the Run key and a flyd already
// runs, which it then leaves running (see checkForeign).
func (c *serviceCmd) runningUnsupervised(p servicePlatform, m serviceManager) bool {
	if !p.runKey {
		return false
	}
	st, err := m.Status()
	return err == nil && st == service.StatusRunning
}

// warnDisabled warns when Windows has the Run key value turned off (Task
// Manager's startup apps), and records the warning in st when st is not
// nil.
func (c *serviceCmd) warnDisabled(p servicePlatform, st *serviceStatus) {
	if !p.runKey || c.runKey == nil {
		return
	}
	if off, err := c.runKey.disabled(p.name); err != nil || !off {
		return
	}
	msg := "Windows has flyd's start at logon turned off: turn \"" + p.name + "\" on in Task Manager's startup apps (or Settings > Apps > Startup)"
	c.warnf("%s", msg)
	if st != nil {
		st.Warnings = append(st.Warnings, msg)
	}
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
	Manager   string `json:"manager"`   // systemd, launchd or Run key (Windows)
	Unit      string `json:"unit"`      // the unit file, or the Run key value (HKCU\...\Run\fly)
	Installed bool   `json:"installed"` // the unit file (value) exists; for the package's unit, it is enabled
	// Packaged: Unit is the one a distro package installed for every user
	// (/usr/lib/systemd/user/flyd.service), which install enables rather
	// than writing a unit; it holds no PATH.
	Packaged bool `json:"packaged,omitempty"`
	// PackagedUnit is the package's unit when it runs this flyctl's flyd
	// (CurrentFlyd), which is what install then enables.
	PackagedUnit string   `json:"packaged_unit,omitempty"`
	State        string   `json:"state"` // running, stopped, restarting, failed, not installed or unknown
	Running      bool     `json:"running"`
	PID          int      `json:"pid,omitempty"`          // Run key: the pid of the flyd that answers
	Command      string   `json:"command,omitempty"`      // Run key: the command line the value holds
	Flyd         string   `json:"flyd,omitempty"`         // the binary the unit runs
	Args         []string `json:"args,omitempty"`         // and its arguments
	Path         string   `json:"path,omitempty"`         // the PATH the unit holds
	CurrentFlyd  string   `json:"current_flyd,omitempty"` // the flyd install would run now
	CurrentPath  string   `json:"current_path"`           // the PATH install would bake in now: yours; none for the package's unit
	Linger       *bool    `json:"linger,omitempty"`       // Linux: the service outlives logout
	Log          string   `json:"log"`                    // where flyd's log is, or how to read it
	Warnings     []string `json:"warnings"`
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
	cur, where, curErr := c.findFlyd()
	target := p // the unit install would set up
	if curErr == nil {
		target = c.target(p, cur)
	}
	eff, installed, effErr := c.inEffect(ctx, p)
	if !installed {
		eff = target
	}
	st := serviceStatus{
		Manager:     p.manager,
		Unit:        eff.file,
		Packaged:    eff.packaged,
		State:       "not installed",
		CurrentFlyd: cur,
		CurrentPath: c.getenv("PATH"),
		Log:         p.logHint,
		Warnings:    []string{},
	}
	if target.packaged {
		st.PackagedUnit = target.file
		st.CurrentPath = "" // install bakes in nothing
	}
	warn := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		st.Warnings = append(st.Warnings, msg)
		c.warnf("%s", msg)
	}
	if effErr != nil {
		warn("%v", effErr)
	}
	var data []byte
	if installed {
		data, err = c.readUnit(eff)
	}
	switch {
	case !installed || errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read the unit: %w", err)
	default:
		st.Installed = true
		st.State = "unknown"
		if m, err := c.connect(ctx, eff, c.config(eff, unitSpec{}, "")); err != nil {
			warn("%v", err)
		} else {
			switch s, err := m.Status(); {
			case errors.Is(err, errRestarting):
				st.State = "restarting"
				warn("%v; see its log: %s", err, p.logHint)
			case s == service.StatusRunning:
				st.State, st.Running = "running", true
				if pm, ok := m.(interface{ pid() int }); ok {
					st.PID = pm.pid()
				}
			case s == service.StatusStopped:
				st.State = "stopped"
			case err != nil && strings.Contains(err.Error(), "failed state"):
				st.State = "failed"
				warn("the service failed; see its log: %s", p.logHint)
			case err != nil:
				warn("ask %s: %v", p.manager, err)
			}
		}
		if p.runKey {
			st.Command = string(data)
		}
		c.warnDisabled(p, &st)
		info, err := parseUnit(eff, data)
		if err != nil {
			warn("cannot read %s: %v", eff.file, err)
			break
		}
		st.Flyd, st.Args = info.Flyd, info.Args
		if !eff.packaged {
			st.Path = info.Env["PATH"]
		}
		switch {
		case checkExecutable(info.Flyd) != nil && curErr == nil:
			warn("the service runs %s, which is gone; this flyctl is %s %s: run flyctl service install --force", info.Flyd, where, cur)
		case checkExecutable(info.Flyd) != nil:
			warn("the service runs %s, which is gone: reinstall flyd next to flyctl, then run flyctl service install --force", info.Flyd)
		case curErr == nil && !samePath(info.Flyd, cur):
			warn("the service runs %s; this flyctl is %s %s: run flyctl service install --force", info.Flyd, where, cur)
		case target.packaged && !eff.packaged:
			warn("your own unit %s overrides the package's %s, and would be left behind if the package were removed: run flyctl service install --force to use the package's", eff.file, target.file)
		}
		if !p.runKey && !eff.packaged && !target.packaged && st.Path != st.CurrentPath {
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
		if st.Packaged {
			fmt.Fprintf(c.stdout, "flyd service: not installed (the package's %s is not enabled)\n", st.Unit)
		} else {
			fmt.Fprintf(c.stdout, "flyd service: not installed (%s)\n", st.Unit)
		}
		fmt.Fprintln(c.stderr, "flyctl: install it with: flyctl service install")
		return nil
	}
	if st.PID != 0 {
		fmt.Fprintf(c.stdout, "flyd service: %s (pid %d)\n", st.State, st.PID)
	} else {
		fmt.Fprintf(c.stdout, "flyd service: %s\n", st.State)
	}
	if st.Packaged {
		fmt.Fprintf(c.stdout, "unit:  %s (%s; the package's unit, enabled for you)\n", st.Unit, st.Manager)
	} else {
		fmt.Fprintf(c.stdout, "unit:  %s (%s)\n", st.Unit, st.Manager)
	}
	switch {
	case p.runKey:
		fmt.Fprintf(c.stdout, "runs:  %s\n", st.Command)
		fmt.Fprintln(c.stdout, "       at logon; flyctl mcp starts it again when an editor connects and none answers")
	case st.Packaged && st.Flyd != "":
		fmt.Fprintf(c.stdout, "runs:  %s\n", strings.Join(append([]string{st.Flyd}, st.Args...), " "))
		fmt.Fprintln(c.stdout, "PATH:  none baked in: flyd fills in what a client leaves out from your login shell")
	case st.Flyd != "":
		fmt.Fprintf(c.stdout, "runs:  %s\n", strings.Join(append([]string{st.Flyd}, st.Args...), " "))
		fmt.Fprintf(c.stdout, "PATH:  %s\n", st.Path)
	}
	fmt.Fprintf(c.stdout, "logs:  %s\n", st.Log)
	return nil
}
