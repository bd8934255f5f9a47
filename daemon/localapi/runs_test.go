package localapi

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/store"
)

func TestHTTPRunsListGetStop(t *testing.T) {
	a := newAPIServer(t, serverConfig{}, store.Options{}, false)
	r := a.start(t, fakeflutter.EnvTickMS+"=0")

	var list runsReply
	a.getJSON(t, "GET", "/v1/runs", 200, &list)
	if len(list.Runs) != 1 || list.Runs[0].RunID != r.ID() || list.Runs[0].State != "running" {
		t.Fatalf("GET /v1/runs = %+v, want run %s running", list.Runs, r.ID())
	}
	if want := map[string]string{a.root: "demo"}; !reflect.DeepEqual(list.Projects, want) {
		t.Errorf("GET /v1/runs: projects = %v, want %v (the pubspec's name)", list.Projects, want)
	}
	for _, q := range []string{"?all=1", "?root=" + url.QueryEscape(a.root), "?all=true&root=" + url.QueryEscape(a.root)} {
		var l runsReply
		a.getJSON(t, "GET", "/v1/runs"+q, 200, &l)
		if len(l.Runs) != 1 || l.Runs[0].RunID != r.ID() {
			t.Errorf("GET /v1/runs%s = %+v, want run %s", q, l.Runs, r.ID())
		}
	}
	var other runsReply
	a.getJSON(t, "GET", "/v1/runs?root="+url.QueryEscape(t.TempDir()), 200, &other)
	if other.Runs == nil || len(other.Runs) != 0 {
		t.Errorf("runs of another root = %#v, want an empty list", other.Runs)
	}
	for _, q := range []string{"?root=relative/dir", "?all=maybe", "?workspace=/x", "?all=1&all=0"} {
		var e errorReply
		a.getJSON(t, "GET", "/v1/runs"+q, 400, &e)
		if e.Error == "" {
			t.Errorf("GET /v1/runs%s: no error message", q)
		}
	}

	var info wire.Run
	a.getJSON(t, "GET", "/v1/runs/"+r.ID(), 200, &info)
	if info.RunID != r.ID() || info.State != "running" || info.LogURI != "logs://run/"+r.ID() || info.Root != a.root || info.PID == 0 || info.AppID == "" {
		t.Errorf("GET /v1/runs/%s = %+v", r.ID(), info)
	}
	var nf errorReply
	a.getJSON(t, "GET", "/v1/runs/nosuchrun", 404, &nf)
	if !strings.Contains(nf.Error, `no such run "nosuchrun"`) || !strings.Contains(nf.Hint, "flyctl runs") {
		t.Errorf("unknown run = %+v, want an error naming it and a hint", nf)
	}
	a.getJSON(t, "POST", "/v1/runs/nosuchrun/stop", 404, &nf)
	a.getJSON(t, "GET", "/v1/runs/nosuchrun/logs", 404, &nf)

	resp := a.do(t, "GET", "/v1/runs/"+r.ID()+"/stop")
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET .../stop = %s, want 405", resp.Status)
	}

	var stopped wire.Run
	a.getJSON(t, "POST", "/v1/runs/"+r.ID()+"/stop", 200, &stopped)
	if stopped.State != "stopped" || stopped.ExitCode == nil || stopped.EndedAt.IsZero() {
		t.Errorf("POST stop = %+v, want stopped with an exit code and an end time", stopped)
	}
	var again wire.Run
	a.getJSON(t, "POST", "/v1/runs/"+r.ID()+"/stop", 200, &again)
	if !reflect.DeepEqual(stopped, again) {
		t.Errorf("stopping a stopped run changed it: %+v %+v %+v, then %+v %+v %+v", stopped, stopped.LastAction, stopped.Errors, again, again.LastAction, again.Errors)
	}
	a.getJSON(t, "GET", "/v1/runs/"+r.ID(), 200, &info)
	if info.State != "stopped" {
		t.Errorf("GET after stop: state %s, want stopped", info.State)
	}
}
