package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/kardianos/service"
)

// This file is what the service verbs ask of the machine: the OS service
// manager through kardianos/service, lingering, and whether flyd answers.
// serviceCmd takes each as a function, so tests replace them. (Windows's
// Run key, and the starting and stopping of flyd there, are
// service_runkey*.go's.)

// serviceManager is the part of kardianos/service's Service that flyctl uses. It
// only controls the service; flyd itself never needs kardianos on Linux
// or macOS, where the service manager just runs "flyd run". On Windows,
// runKeyManager (service_runkey.go) implements it without kardianos.
type serviceManager interface {
	Install() error
	Uninstall() error
	Start() error
	Stop() error
	Restart() error
	Status() (service.Status, error)
}

// connectManager returns kardianos/service's manager for cfg, or an error
// with a hint when this user has none: on Linux, that is when systemd is
// not the init system or "systemctl --user" cannot reach a user manager
// (containers, CI, su or sudo -u sessions).
func connectManager(ctx context.Context, p servicePlatform, cfg *service.Config) (serviceManager, error) {
	if p.goos != runtime.GOOS {
		return nil, fmt.Errorf("cannot manage a %s service from %s", p.goos, runtime.GOOS)
	}
	if p.goos == "linux" {
		if err := probeSystemdUser(ctx); err != nil {
			return nil, err
		}
		if sys := service.Platform(); sys != "linux-systemd" {
			return nil, fmt.Errorf("systemctl --user is not available (the service manager here is %s, not systemd); run flyd in the foreground with: flyd run", sys)
		}
	}
	// The Interface is only used by Service.Run, which flyctl never calls.
	s, err := service.New(nil, cfg)
	if err != nil {
		return nil, fmt.Errorf("service manager: %w", err)
	}
	if p.goos == "linux" {
		sd := systemdService{s, cfg.Name + ".service"}
		if p.packaged {
			return packagedService{sd}, nil
		}
		return sd, nil
	}
	return s, nil
}

// errRestarting is Status's error for a service that keeps exiting and
// that systemd is about to start again.
var errRestarting = errors.New("flyd keeps exiting and systemd keeps restarting it")

// systemdService refines kardianos/service for a systemd user unit: its
// Status tells a crash loop from running (kardianos counts "activating"
// as running), and Start and Restart first clear a failed state, since
// the user asked for a start, not for systemd's start limit.
type systemdService struct {
	service.Service
	unit string
}

func (s systemdService) systemctl(args ...string) (string, error) {
	out, err := exec.Command("systemctl", append([]string{"--user"}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}

// packagedService is systemdService for the unit a distro package
// installed (servicePlatform.packaged): Install enables it and Uninstall
// disables it, as "systemctl --user enable" and "disable" do, and neither
// writes nor removes a file: the file is the package's.
type packagedService struct{ systemdService }

func (s packagedService) Install() error   { return s.run("enable") }
func (s packagedService) Uninstall() error { return s.run("disable") }

// run runs systemctl --user verb on the unit; its error holds what
// systemctl said.
func (s packagedService) run(verb string) error {
	out, err := exec.Command("systemctl", "--user", verb, s.unit).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl --user %s %s: %w: %s", verb, s.unit, err, firstLine(string(out)))
	}
	return nil
}

// systemdEnabled reports whether the user's systemd starts p's unit at
// login: "systemctl --user is-enabled" says enabled (for this user, or
// for every user with --global).
func systemdEnabled(ctx context.Context, p servicePlatform) (bool, error) {
	if err := probeSystemdUser(ctx); err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, "systemctl", "--user", "is-enabled", p.name+".service")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// It exits 1 for disabled, masked and the like, and prints the state
	// either way.
	switch state := firstLine(string(out)); {
	case strings.HasPrefix(state, "enabled"): // enabled, enabled-runtime
		return true, nil
	case state != "":
		return false, nil
	case err == nil:
		return false, errors.New("systemctl --user is-enabled said nothing")
	}
	return false, fmt.Errorf("systemctl --user is-enabled %s.service: %w: %s", p.name, err, firstLine(stderr.String()))
}

// firstLine is the first line of s, trimmed.
func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

func (s systemdService) Status() (service.Status, error) {
	st, err := s.Service.Status()
	if st == service.StatusRunning {
		if sub, _ := s.systemctl("show", "--property=SubState", "--value", s.unit); sub == "auto-restart" {
			return service.StatusStopped, errRestarting
		}
	}
	return st, err
}

func (s systemdService) Start() error {
	s.systemctl("reset-failed", s.unit)
	return s.Service.Start()
}

func (s systemdService) Restart() error {
	s.systemctl("reset-failed", s.unit)
	return s.Service.Restart()
}

// probeSystemdUser checks that "systemctl --user" reaches a user manager.
func probeSystemdUser(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "systemctl", "--user", "show", "--property=Version").CombinedOutput()
	if err == nil {
		return nil
	}
	why := strings.TrimSpace(strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0])
	if why == "" {
		why = err.Error()
	}
	return fmt.Errorf("systemctl --user is not available (no user systemd session: %s); run flyd in the foreground with: flyd run", why)
}

// lingerEnabled reports whether systemd keeps user's manager, and so the
// service, running while user is logged out. It looks for the flag file
// first, then asks loginctl.
func lingerEnabled(ctx context.Context, user string) (bool, error) {
	const dir = "/var/lib/systemd/linger"
	if _, err := os.Stat(filepath.Join(dir, user)); err == nil {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "loginctl", "show-user", user, "--property=Linger").Output()
	if err == nil {
		switch strings.TrimSpace(string(out)) {
		case "Linger=yes":
			return true, nil
		case "Linger=no":
			return false, nil
		}
	}
	// loginctl knows no user without a session; the flag directory is
	// enough when systemd-logind keeps one.
	if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
		return false, nil
	}
	if err == nil {
		err = fmt.Errorf("loginctl said %q", strings.TrimSpace(string(out)))
	}
	return false, fmt.Errorf("cannot tell whether lingering is on for %s: %w", user, err)
}

// loginName is the login name of the user flyctl runs as.
func loginName(getenv func(string) string) string {
	if u := getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// pingDaemon returns the pid of the flyd that answers on the socket that
// getenv points to, whatever its protocol version.
func pingDaemon(getenv func(string) string) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		lc, err := newClient(getenv)
		if err != nil {
			return 0, err
		}
		defer lc.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return lc.Ping(ctx)
	}
}
