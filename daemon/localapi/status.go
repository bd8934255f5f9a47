package localapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"

	"github.com/fly-dev/fly/daemon/index"
	"github.com/fly-dev/fly/internal/wire"
)

// status answers GET /v1/status.
func (a *API) status(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(a.cfg.Status())
}

// restartUpstream answers POST /v1/upstreams/{name}/restart.
func (a *API) restartUpstream(w http.ResponseWriter, r *http.Request) {
	n, err := a.cfg.RestartUpstream(r.PathValue("name"))
	if errors.Is(err, ErrUnavailable) {
		http.Error(w, "upstreams are not running", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"restarted": n})
}

// rotateToken answers POST /v1/token/rotate: it replaces the loopback
// listener's token. Only a peer on the socket may: a holder of the old
// token cannot lock its owner out.
func (a *API) rotateToken(w http.ResponseWriter, r *http.Request) {
	if !a.cfg.Trusted(r) {
		http.Error(w, "rotate the token through the socket (flyctl token rotate)", http.StatusForbidden)
		return
	}
	tok, err := a.cfg.RotateToken()
	if errors.Is(err, ErrUnavailable) {
		http.Error(w, "flyd has no loopback listener (flyd run --listen)", http.StatusConflict)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
}

// shutdown answers POST /v1/shutdown: flyd stops as it does on SIGTERM
// (Windows has no SIGTERM for a windowless process), keeping the runs
// their holders keep, unless ?runs=1 asks for every run to stop too. Only
// a peer on the socket may ask: a holder of the loopback token could
// otherwise stop every agent's runs.
func (a *API) shutdown(w http.ResponseWriter, r *http.Request) {
	if !a.cfg.Trusted(r) {
		http.Error(w, "stop flyd through the socket (flyctl daemon stop)", http.StatusForbidden)
		return
	}
	req := wire.ShutdownRequest{Runs: r.URL.Query().Get(wire.QueryShutdownRuns) == "1"}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]int{"pid": os.Getpid()})
	a.cfg.Shutdown(req)
}

// grep answers GET /v1/grep?workspace=DIR&pattern=…: files_grep for
// flyctl grep, as JSON (wire.GrepResult).
func (a *API) grep(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ctxN := 0
	if v := q.Get("context"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			http.Error(w, "context must be a number", http.StatusBadRequest)
			return
		}
		ctxN = n
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	gq := index.GrepQuery{Pattern: q.Get("pattern"), Literal: q.Get("literal") == "1", Glob: q.Get("glob"),
		CaseInsensitive: q.Get("i") == "1", Context: ctxN, Limit: limit, Cursor: q.Get("cursor")}
	root, idx, release, err := a.cfg.Workspace(q.Get("workspace"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorReply{Error: err.Error()})
		return
	}
	defer release()
	pg, err := a.search(r.Context(), idx, gq)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, context.Canceled) {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, errorReply{Error: err.Error()})
		return
	}
	out := wire.GrepResult{Root: root, Matches: pg.Matches, FilesSearched: pg.Searched,
		SkippedBinary: pg.SkippedBinary, SkippedLarge: pg.SkippedLarge, Truncated: pg.Truncated, NextCursor: pg.NextCursor()}
	for _, f := range pg.Files {
		gf := wire.GrepFile{Path: f.Path}
		for _, m := range f.Matches {
			gf.Matches = append(gf.Matches, wire.GrepMatch{Line: m.Line, Text: m.Text, Before: m.Before, After: m.After})
		}
		out.Files = append(out.Files, gf)
	}
	writeJSON(w, http.StatusOK, out)
}

// grepBudget is the text of one page of flyctl grep: what files_grep
// returns to an agent.
const grepBudget = 16 << 10

func (a *API) search(ctx context.Context, idx *index.Index, q index.GrepQuery) (index.GrepPage, error) {
	opt, err := q.Options(grepBudget, a.cfg.MaxFileBytes)
	if err != nil {
		return index.GrepPage{}, err
	}
	return idx.Grep(ctx, idx.Root(), opt)
}
