package daemon

import (
	"embed"
	"io/fs"
	"net/http"
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
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Cache-Control", "no-store")
		http.ServeFileFS(w, r, sub, "index.html")
	})
}

func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}
