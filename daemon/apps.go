package daemon

import (
	"path/filepath"

	"github.com/fly-dev/fly/daemon/dtd"
	"github.com/fly-dev/fly/internal/safetext"
	"github.com/fly-dev/fly/internal/wire"
)

// startApps starts finding the apps that run outside fly (an IDE's, a
// terminal's) through the files their Dart Tooling Daemons write, and
// returns the function that stops it.
func (s *Server) startApps() func() {
	if s.cfg.DTDDir == "" {
		return func() {}
	}
	w, err := dtd.Start(dtd.Config{Dir: s.cfg.DTDDir, Served: s.servedRoot, Changed: s.api.Changed, Log: s.log.With("component", "dtd")})
	if err != nil {
		s.log.Warn("not finding apps started outside fly", "dir", s.cfg.DTDDir, logErr, err)
		return func() {}
	}
	s.apps.Store(w)
	s.log.Info("finding apps started outside fly", "dir", s.cfg.DTDDir)
	return func() {
		s.apps.Store(nil)
		w.Close()
	}
}

// servedRoot is the open workspace that holds dir, as discovery asks.
func (s *Server) servedRoot(dir string) (string, bool) {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	return s.ws.containing(filepath.Clean(dir))
}

// externalApps lists the apps found outside fly, of root ("" for all).
func (s *Server) externalApps(root string) []wire.App {
	w := s.apps.Load()
	out := []wire.App{}
	if w == nil {
		return out
	}
	for _, a := range w.Apps() {
		if root == "" || a.Workspace == root {
			// A DTD file's names are another process's words: runs_list,
			// flyctl and the dashboard show them with no control, bidi
			// or zero-width character and on one line.
			out = append(out, wire.App{ID: a.ID, Name: safetext.Field(a.Name), IDE: safetext.Field(a.IDE), Workspace: a.Workspace, Root: safetext.Field(a.Root),
				VMServiceURI: a.VMServiceURI, DTDPID: a.DTDPID, Since: a.Since})
		}
	}
	return out
}
