package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/kardianos/service"
	"github.com/spf13/pflag"
)

// This file is flyctl service status: what it reports of the service, as
// text or JSON, and the warnings about lingering and a start at logon
// turned off that install gives too.

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
