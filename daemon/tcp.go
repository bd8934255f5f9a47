package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/fly-dev/fly/daemon/localapi"
	"github.com/fly-dev/fly/daemon/loopback"
)

// The loopback listener: see daemon/loopback for its guard.

// startTCP starts the loopback listener if the config asks for one. Its
// failure is logged, never fatal: the socket keeps serving. The returned
// function stops it; nil when there is none.
func (s *Server) startTCP() (stop func()) {
	if s.cfg.Listen == "" {
		_ = os.Remove(s.cfg.Paths.HTTPAddr())
		return nil
	}
	var err error
	if s.tokens, err = loopback.LoadTokens(s.cfg.Paths.Token()); err != nil {
		s.log.Error("no loopback listener: cannot keep its token", logErr, err)
		return nil
	}
	ln, note, err := loopback.Listen(s.cfg.Listen)
	if err != nil {
		s.log.Error("no loopback listener; the socket still serves", logErr, err)
		return nil
	}
	s.httpAddr = ln.Addr().String()
	if note != "" {
		s.log.Warn(note)
		s.httpWanted = s.cfg.Listen
	}
	if err := os.WriteFile(s.cfg.Paths.HTTPAddr(), []byte(s.httpAddr+"\n"), 0o600); err != nil {
		s.log.Warn("write the listener's address", logErr, err)
	}
	hs := &http.Server{
		Handler:           localapi.Headers(s.tokens.Guard(s.routes(), localapi.Public)),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       connIdle,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	capped, maxConns := loopback.Limit(ln, s.log)
	hs.RegisterOnShutdown(s.closeHTTPSessions)
	done := make(chan struct{})
	go func() { // owned by stop
		defer close(done)
		if err := hs.Serve(capped); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("loopback listener stopped; the socket still serves", logErr, err)
		}
	}()
	s.log.Info("flyd listening on loopback", "addr", s.httpAddr, "token_file", s.cfg.Paths.Token(), "max_conns", maxConns)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
		_ = os.Remove(s.cfg.Paths.HTTPAddr())
	}
}

// closeHTTPSessions ends every Streamable HTTP session, so that their
// hanging GET streams let the HTTP servers shut down.
func (s *Server) closeHTTPSessions() {
	s.http.mu.Lock()
	all := make([]*httpSession, 0, len(s.http.m))
	for _, h := range s.http.m {
		all = append(all, h)
	}
	s.http.mu.Unlock()
	for _, h := range all {
		h.close()
	}
}

// rotateToken replaces the loopback listener's token.
func (s *Server) rotateToken() (string, error) {
	if s.tokens == nil {
		return "", localapi.ErrUnavailable
	}
	return s.tokens.Rotate()
}
