package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fly-dev/fly/daemon/localapi"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/daemon/upstream"
	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/store"
)

// startUpstreams creates the upstream manager over db and runs its
// config watcher. The returned function stops every upstream and waits.
func (s *Server) startUpstreams(db *store.DB) (stop func()) {
	path := s.cfg.Upstreams
	if path == "" {
		path = s.cfg.Paths.Upstreams()
	}
	if path == "-" {
		path = ""
	}
	s.up = upstream.New(upstream.Config{
		Path:     path,
		Start:    s.startUpstream,
		Cache:    db,
		Linger:   s.cfg.Linger,
		Reserved: s.surface.Reserved,
		Changed:  s.api.Changed,
		Log:      s.log.With("component", "upstream"),
	})
	s.surface.UseUpstreams(s.up)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // owned by stop
		defer close(done)
		if err := s.up.Run(ctx); err != nil {
			s.log.Warn("upstreams config watcher stopped", logErr, err)
		}
	}()
	return func() {
		cancel()
		<-done
		s.up.Close()
	}
}

// startUpstream runs an upstream's command as a run of the engine: its
// own process group, its stderr a persisted log (logs://upstream/{id}),
// killed at flyd's stop and after a crash like any run.
func (s *Server) startUpstream(ctx context.Context, srv mcpconfig.Server, root string, env map[string]string) (upstream.Process, error) {
	path, err := lookPathIn(srv.Command, env["PATH"])
	if err != nil {
		return nil, err
	}
	r, err := s.runs.Start(ctx, runs.Spec{Kind: store.KindUpstream, Root: root, Env: env, Command: path, Name: srv.Command, Args: srv.Args})
	if err != nil {
		return nil, err
	}
	return upstreamProc{r}, nil
}

// lookPathIn finds a bare command on the session's PATH (the editor's,
// where people installed dart and npx), else on flyd's.
func lookPathIn(command, pathEnv string) (string, error) {
	if strings.Contains(command, "/") || pathEnv == "" {
		return exec.LookPath(command)
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, command)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(command)
	if err != nil {
		return "", errors.New(command + " is not on the PATH of the session or of flyd; give its absolute path in upstreams.json")
	}
	return p, nil
}

// upstreamProc is a run of the engine seen as an upstream process.
type upstreamProc struct{ r *runs.Run }

func (p upstreamProc) ID() string                             { return p.r.ID() }
func (p upstreamProc) PID() int                               { return p.r.Record().PID }
func (p upstreamProc) Stdio() (io.WriteCloser, io.ReadCloser) { return p.r.Stdio() }
func (p upstreamProc) Done() <-chan struct{}                  { return p.r.Done() }
func (p upstreamProc) Tail(n int) []string                    { return p.r.Tail(n) }
func (p upstreamProc) Stop(ctx context.Context) error         { return p.r.Stop(ctx) }

// restartUpstream restarts the instances of the named upstream.
func (s *Server) restartUpstream(name string) (int, error) {
	if s.up == nil {
		return 0, localapi.ErrUnavailable
	}
	return s.up.Restart(name)
}
