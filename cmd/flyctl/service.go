package main

import (
	"context"
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
)

// This file is flyctl service itself: its help texts, serviceCmd and how
// it is made, and what the verbs share: the platform, reading and removing
// the unit, its config, and finding flyd.

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
