package localapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/wire"
)

// Only a peer on the socket may stop flyd; it is told flyd's pid. A body
// asking for the runs to stop too is passed on.
func TestShutdownSocketOnly(t *testing.T) {
	asked := 0
	var got []wire.ShutdownRequest
	a := New(Config{Status: func() wire.Status { return wire.Status{} }, Log: slog.New(slog.DiscardHandler),
		Trusted:  func(r *http.Request) bool { return r.Header.Get("X-Test-Socket") == "1" },
		Shutdown: func(req wire.ShutdownRequest) { asked++; got = append(got, req) }})
	t.Cleanup(a.Close)
	mux := http.NewServeMux()
	a.Register(mux)
	for _, socket := range []bool{false, true} {
		req := httptest.NewRequest(http.MethodPost, wire.RouteShutdown, nil)
		if socket {
			req.Header.Set("X-Test-Socket", "1")
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		switch {
		case !socket && (w.Code != http.StatusForbidden || asked != 0):
			t.Errorf("shutdown over TCP = %d %q (asked %d), want 403 and flyd running", w.Code, w.Body, asked)
		case socket && (w.Code != http.StatusAccepted || asked != 1 || !strings.Contains(w.Body.String(), strconv.Itoa(os.Getpid()))):
			t.Errorf("shutdown over the socket = %d %q (asked %d), want 202 with the pid", w.Code, w.Body, asked)
		}
	}
	req := httptest.NewRequest(http.MethodPost, wire.RouteShutdown+"?"+wire.QueryShutdownRuns+"=1", nil)
	req.Header.Set("X-Test-Socket", "1")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	if w.Code != http.StatusAccepted || len(got) != 2 || got[0].Runs || !got[1].Runs {
		t.Errorf("shutdown with runs = %d, requests %+v; want the second to ask for the runs", w.Code, got)
	}
}
