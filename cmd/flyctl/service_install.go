package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/paths"
	"github.com/kardianos/service"
	"github.com/spf13/pflag"
)

// This file is the verbs that change the service: install, uninstall,
// start, stop and restart, and what they check before and after.

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
