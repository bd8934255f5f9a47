package daemon

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// The dashboard is plain HTML, CSS and JavaScript embedded in flyd: no
// CDN, no build step, works offline. It reads the same API as flyctl.
//
//go:embed dashboard
var dashboardFiles embed.FS

func (s *Server) addDashboard(mux *http.ServeMux) {
	sub, _ := fs.Sub(dashboardFiles, "dashboard")
	files := http.FileServerFS(sub)
	mux.Handle("GET /dashboard/", http.StripPrefix("/dashboard/", noStore(files)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		http.ServeFileFS(w, r, sub, "index.html")
	})
}

// localPublic reports whether path is one of the dashboard's static
// files, which hold no data and so are served without the token (a
// browser's navigation cannot send one).
func localPublic(path string) bool {
	return path == "/" || strings.HasPrefix(path, "/dashboard/")
}

// setPageHeaders sets what every response carries so that no page of
// flyd's can be framed by another (clickjacking its Stop buttons) or run
// anything but its own scripts. It is the one place that sets them:
// Handler and the TCP guard's own refusals call it.
func setPageHeaders(h http.Header) {
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
