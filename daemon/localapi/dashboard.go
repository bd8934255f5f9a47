package localapi

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/fly-dev/fly/internal/wire"
)

// The dashboard is plain HTML, CSS and JavaScript embedded in flyd: no
// CDN, no build step, works offline. It reads the same API as flyctl.
//
//go:embed dashboard
var dashboardFiles embed.FS

// addDashboard serves the dashboard's page and files.
func addDashboard(mux *http.ServeMux) {
	sub, _ := fs.Sub(dashboardFiles, "dashboard")
	files := http.FileServerFS(sub)
	mux.Handle("GET /dashboard/", http.StripPrefix("/dashboard/", noStore(files)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		http.ServeFileFS(w, r, sub, "index.html")
	})
	// Browsers ask for /favicon.ico by themselves, whatever the page
	// says: it is the dashboard's icon, so that no request of the page
	// fails.
	mux.HandleFunc("GET "+faviconPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "no-store")
		http.ServeFileFS(w, r, sub, "favicon.svg")
	})
}

// faviconPath is where browsers look for a site's icon.
const faviconPath = "/favicon.ico"

// Public reports whether path is one of the dashboard's static
// files, which hold no data and so are served without the token (a
// browser's navigation, or its request for the icon, cannot send one).
func Public(path string) bool {
	return path == "/" || path == faviconPath || strings.HasPrefix(path, "/dashboard/")
}

// SetPageHeaders sets what every response carries so that no page of
// flyd's can be framed by another (clickjacking its Stop buttons) or run
// anything but its own scripts. It is the one place that sets them:
// the daemon calls it for every answer, the TCP guard's refusals included.
func SetPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// Headers sets what every answer of flyd carries, on every listener and
// route (MCP's included), before next answers: the daemon's version and
// the page headers. The TCP guard's refusals carry them too.
func Headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.HeaderVersion, wire.VersionHeader())
		SetPageHeaders(w.Header())
		next.ServeHTTP(w, r)
	})
}
