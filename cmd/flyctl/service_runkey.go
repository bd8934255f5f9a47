package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fly-dev/fly/internal/owner"
	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/proc"
	"github.com/kardianos/service"
)

// This file is flyctl service on Windows: a start at logon, and flyctl
// starting and stopping flyd itself, as the shim does.
//
// Why the Run key: kardianos/service installs a Windows service, which
// needs an administrator to install and runs in session 0, with no
// desktop: the window of an app flyd runs (flutter run -d windows) would
// never be seen, and flyd is a daemon of one user, not of the machine. A
// per-user start at logon is either a Task Scheduler logon task or a value
// of HKCU's Run key. A task could restart flyd when it fails, but it is
// made through COM (or schtasks, whose XML and quoting are a parser of
// their own) and its logon trigger needs care to work without an
// administrator. The Run key is one registry value of the user's, written
// without an administrator or COM, that Explorer runs at every logon in
// the user's session, and that Task Manager lists (and lets the user turn
// off) as a startup app. It does not restart flyd when it fails; flyctl
// mcp does, since it starts flyd whenever an editor connects and none
// answers. The Run key is also what tests can exercise here: Wine keeps a
// registry, and its schtasks is a stub.

// runKey is the values of a registry key of the user's, by name: HKCU's
// Run key (service_runkey_windows.go), or a fake.
type runKey interface {
	// get returns the command line of the value name; its error wraps
	// fs.ErrNotExist when there is none.
	get(name string) (string, error)
	// set writes command into the value name.
	set(name, command string) error
	// remove removes the value name; one that is not there is not an
	// error.
	remove(name string) error
	// disabled reports whether the user turned the value name off in
	// Task Manager's startup apps (or Settings), which Explorer keeps
	// apart from the value.
	disabled(name string) (bool, error)
}

// runKeyManager is the serviceManager of the Run key platform. Install and
// Uninstall write and remove the value; Start starts the command line the
// value holds, detached, as the shim starts flyd; Stop ends the flyd that
// answers on the socket; the status is whether one answers. A flyd the
// shim started is as good as one started here: there is no supervisor
// that could tell them apart.
//
// serviceManager's methods take no context (they are kardianos's): each
// of these bounds its own waits.
type runKeyManager struct {
	key     runKey
	name    string   // the value's name
	command string   // what Install writes; "" when not installing
	env     []string // the environment flyd is started with
	log     string   // where a started flyd's output goes
	ping    func(context.Context) (int, error)
	start   func(argv, env []string, log string) error
	end     func(ctx context.Context, pid int) error
	lastPID int // the pid of the flyd Status found
}

// runKeyManager returns the Run key's manager for p; cfg's option p.option
// is the command line Install writes.
func (c *serviceCmd) runKeyManager(p servicePlatform, cfg *service.Config) (serviceManager, error) {
	if c.runKey == nil || c.ping == nil || c.startFlyd == nil || c.endFlyd == nil {
		return nil, errNoRunKey
	}
	command, _ := cfg.Option[p.option].(string)
	return &runKeyManager{
		key:     c.runKey,
		name:    p.name,
		command: command,
		env:     serviceEnviron(c.getenv),
		log:     p.log,
		ping:    c.ping,
		start:   c.startFlyd,
		end: func(ctx context.Context, pid int) error {
			return c.endFlyd(ctx, c.getenv, pid)
		},
	}, nil
}

func (m *runKeyManager) Install() error {
	if m.command == "" {
		return errors.New("no command line to write")
	}
	return m.key.set(m.name, m.command)
}

func (m *runKeyManager) Uninstall() error { return m.key.remove(m.name) }

func (m *runKeyManager) Status() (service.Status, error) {
	pid, err := m.ping(context.Background())
	if err != nil {
		m.lastPID = 0
		return service.StatusStopped, nil
	}
	m.lastPID = pid
	return service.StatusRunning, nil
}

// pid is the pid of the flyd that Status found running.
func (m *runKeyManager) pid() int { return m.lastPID }

// Start starts what the value holds, unless a flyd answers already.
func (m *runKeyManager) Start() error {
	if st, _ := m.Status(); st == service.StatusRunning {
		return nil
	}
	line, err := m.key.get(m.name)
	if err != nil {
		return err
	}
	info, err := parseRunCommand(line)
	if err != nil {
		return fmt.Errorf("read the Run key value %s: %w", m.name, err)
	}
	if m.log == "" {
		return errors.New("no log file for flyd")
	}
	return m.start(append([]string{info.Flyd}, info.Args...), m.env, m.log)
}

// Stop ends the flyd that answers, and waits until it has ended.
func (m *runKeyManager) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), serviceReadyTimeout)
	defer cancel()
	pid, err := m.ping(ctx)
	if err != nil {
		return nil // none answers
	}
	return m.end(ctx, pid)
}

func (m *runKeyManager) Restart() error {
	if err := m.Stop(); err != nil {
		return err
	}
	return m.Start()
}

// startDetachedFlyd starts argv as the shim starts flyd: detached (on
// Windows with no console and out of flyctl's job where allowed), with
// env, stdin from the null device and its output appended to log, in the
// state directory (log's), which it makes if need be, private. flyd
// outlives flyctl: nothing waits for it. Its working directory is the
// state directory, not flyctl's: on Windows a process's working directory
// cannot be removed while it runs.
func startDetachedFlyd(argv, env []string, log string) error {
	dir := filepath.Dir(log)
	if err := owner.MkdirPrivate(dir); err != nil {
		return fmt.Errorf("start flyd: %w", err)
	}
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start flyd: %w", err)
	}
	defer f.Close() // the child has its own handle
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := proc.StartDetached(cmd); err != nil {
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	return cmd.Process.Release()
}

// serviceEnviron is the environment flyctl starts flyd with: flyctl's
// (environ), with fly's own variables as getenv gives them, so that the
// flyd answers where flyctl asks.
func serviceEnviron(getenv func(string) string) []string {
	env := environ(getenv)
	seen := make(map[string]bool)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		seen[k] = true
	}
	for _, k := range []string{paths.EnvSocket, paths.EnvStateDir, paths.EnvConfigDir} {
		if v := getenv(k); v != "" && !seen[k] {
			env = append(env, k+"="+v)
		}
	}
	return env
}
