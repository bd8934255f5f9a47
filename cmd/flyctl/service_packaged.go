package main

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/fly-dev/fly/internal/paths"
	"github.com/kardianos/service"
)

// This file is the service verbs' second kind of systemd unit: the one a
// distro package installs for every user (fly's deb and rpm install
// /usr/lib/systemd/user/flyd.service). When it runs the flyd that install
// would run, install enables it rather than writing a unit of its own,
// so that removing the package (whose prerm disables and stops the
// packaged unit in every running user manager) stops flyd and leaves no
// unit behind; a unit of the user's own would outlive the package,
// pointing at a flyd that is gone. A flyd of the user's own (a tarball's
// or go install's, in ~/.local/bin) keeps getting its own unit.
//
// A user's systemd runs one flyd.service: the user's own unit in
// ~/.config/systemd/user when there is one, which overrides the
// package's, else the package's (inEffect). install moves from one to
// the other with --force.

// packagedPlatform returns the package's unit as a platform beside p, the
// user's own, when there is one: on Linux, when c.packagedUnit exists.
func (c *serviceCmd) packagedPlatform(p servicePlatform) (servicePlatform, bool) {
	if p.goos != "linux" || p.runKey || c.packagedUnit == "" {
		return p, false
	}
	if _, err := os.Stat(c.packagedUnit); err != nil {
		return p, false
	}
	return p.packagedAt(c.packagedUnit), true
}

// target returns the unit install sets up for flyd: the package's when it
// runs flyd (flyd is the packaged one, say /usr/bin/flyd), else p, the
// user's own.
func (c *serviceCmd) target(p servicePlatform, flyd string) servicePlatform {
	pp, ok := c.packagedPlatform(p)
	if !ok {
		return p
	}
	data, err := os.ReadFile(pp.file)
	if err != nil {
		return p
	}
	info, err := parseSystemd(string(data))
	if err != nil || !samePath(info.Flyd, flyd) || !slices.Equal(info.Args, p.args) {
		return p
	}
	return pp
}

// inEffect returns the unit the user's service manager runs as flyd's,
// and whether there is one: p's (the user's own unit, or on Windows the
// Run key value) when it exists, else the package's when it is enabled.
// Its error is from asking whether the package's is enabled; p is then
// the one returned.
func (c *serviceCmd) inEffect(ctx context.Context, p servicePlatform) (servicePlatform, bool, error) {
	own, err := c.ownUnitExists(p)
	if err != nil || own {
		return p, own, err
	}
	pp, ok := c.packagedPlatform(p)
	if !ok || c.enabled == nil {
		return p, false, nil
	}
	on, err := c.enabled(ctx, pp)
	if err != nil {
		return p, false, fmt.Errorf("ask whether the package's unit %s is enabled: %w", pp.file, err)
	}
	if on {
		return pp, true, nil
	}
	return p, false, nil
}

// removeOwn stops flyd if p's unit (the user's own) runs it, disables the
// unit and removes it, and reports whether flyd was running.
func (c *serviceCmd) removeOwn(ctx context.Context, p servicePlatform) (wasRunning bool, err error) {
	m, err := c.connect(ctx, p, c.config(p, unitSpec{}, ""))
	if err != nil {
		return false, fmt.Errorf("%w; or remove the unit by hand: %s", err, p.remove)
	}
	if st, _ := m.Status(); st == service.StatusRunning {
		wasRunning = true
		if err := m.Stop(); err != nil {
			return true, fmt.Errorf("stop the flyd service: %w", err)
		}
	}
	if err := m.Uninstall(); err != nil {
		return wasRunning, fmt.Errorf("uninstall %s: %w", p.file, err)
	}
	return wasRunning, c.removeUnit(p)
}

// disablePackaged stops flyd if the package's unit pp runs it, and
// disables the unit: "systemctl --user disable --now". The file stays:
// it is the package's, for every user.
func (c *serviceCmd) disablePackaged(ctx context.Context, pp servicePlatform) error {
	m, err := c.connect(ctx, pp, c.config(pp, unitSpec{}, ""))
	if err != nil {
		return err
	}
	if st, _ := m.Status(); st == service.StatusRunning {
		if err := m.Stop(); err != nil {
			return fmt.Errorf("stop the flyd service: %w", err)
		}
	}
	if err := m.Uninstall(); err != nil {
		return fmt.Errorf("disable %s: %w", pp.file, err)
	}
	return nil
}

// warnEnabledForAll warns when the package's unit pp is still enabled
// after this user disabled it: an administrator enabled it for every user
// (systemctl --global enable).
func (c *serviceCmd) warnEnabledForAll(ctx context.Context, pp servicePlatform) {
	if c.enabled == nil {
		return
	}
	if on, err := c.enabled(ctx, pp); err == nil && on {
		c.warnf("%s is still enabled, for every user (systemctl --global enable %s.service); to keep it from starting for you: systemctl --user mask %s.service", pp.file, pp.name, pp.name)
	}
}

// installPackaged is install when flyd is the package's: it enables the
// package's unit pp and starts it (systemctl --user enable --now, with
// the foreign-flyd check between), replacing the user's own unit with
// --force. p is the user's own.
func (c *serviceCmd) installPackaged(ctx context.Context, p, pp servicePlatform, flyd string, o *serviceInstallOptions) error {
	for _, v := range []string{paths.EnvSocket, paths.EnvStateDir} {
		if c.getenv(v) != "" {
			c.warnf("%s is set here, but the package's unit runs flyd with your systemd user manager's environment, which install does not change: set it there (a file in ~/.config/environment.d), or flyd listens elsewhere", v)
		}
	}
	// An error here (no user manager) is connect's to report, with its hint.
	eff, installed, _ := c.inEffect(ctx, p)
	own := installed && !eff.packaged
	if o.dryRun {
		fmt.Fprintf(c.stderr, "flyctl: would enable %s, the package's unit (systemctl --user enable --now %s.service), and write no unit; it is:\n", pp.file, pp.name)
		switch {
		case own && !o.force:
			fmt.Fprintf(c.stderr, "flyctl: (your own unit %s overrides it: install needs --force to remove yours)\n", p.file)
		case own:
			fmt.Fprintf(c.stderr, "flyctl: (and remove your own unit %s, which overrides it)\n", p.file)
		case installed && !o.force:
			fmt.Fprintf(c.stderr, "flyctl: (it is enabled: install needs --force to enable and restart it again)\n")
		}
		data, err := os.ReadFile(pp.file)
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(data)
		return err
	}
	if installed && !o.force {
		if own {
			return fmt.Errorf("the flyd service is already installed (%s, your own unit, which overrides the package's %s and would be left behind if the package were removed); replace it with the package's: flyctl service install --force", p.file, pp.file)
		}
		return fmt.Errorf("the flyd service is already installed (%s, the package's unit, enabled); enable and restart it again with: flyctl service install --force", pp.file)
	}

	if own {
		if _, err := c.removeOwn(ctx, p); err != nil {
			return fmt.Errorf("replace your own unit with the package's: %w", err)
		}
	}
	m, err := c.connect(ctx, pp, c.config(pp, unitSpec{Flyd: flyd}, ""))
	if err != nil {
		return err
	}
	st, _ := m.Status()
	running := st == service.StatusRunning
	if err := m.Install(); err != nil {
		return fmt.Errorf("enable %s: %w", pp.file, err)
	}
	fmt.Fprintf(c.stdout, "enabled %s, the package's unit (runs %s run)\n", pp.file, flyd)
	if own {
		fmt.Fprintf(c.stdout, "removed your own unit %s, which overrode it\n", p.file)
	}
	switch {
	case running && o.force:
		if err := m.Restart(); err != nil {
			return fmt.Errorf("restart the flyd service: %w; see its log: %s", err, pp.logHint)
		}
		fmt.Fprintln(c.stdout, "restarted flyd")
	case running:
		fmt.Fprintln(c.stdout, "flyd is already running; it starts at every login from now on")
	default:
		if err := c.checkForeign(ctx, pp); err != nil {
			return fmt.Errorf("the service is enabled but not started: %w", err)
		}
		if err := m.Start(); err != nil {
			return fmt.Errorf("start the flyd service: %w; see its log: %s", err, pp.logHint)
		}
		fmt.Fprintln(c.stdout, "started flyd; it starts at every login from now on")
	}
	c.warnLinger(ctx, pp, nil)
	return c.waitReady(ctx, pp)
}
