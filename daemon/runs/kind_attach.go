package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/fly-dev/fly/store"
)

// flutterAttach is a `flutter attach --machine` of flyd's, started for an
// attached app whose own tool is gone (see attachHelper): it speaks the
// --machine protocol, and belongs to the engine. It is not asked to stop
// the app: stopDetach detaches it, leaving the app running.
var flutterAttach = kindOptions{
	machine: true,
}

// restartThroughAttach reloads the app through a flutter attach of
// flyd's: the tool that ran it is gone, and with it the services that
// recompile it.
func (r *Run) restartThroughAttach(ctx context.Context, full bool) (machineRestartResult, error) {
	h, err := r.attachHelper(ctx)
	if err != nil {
		return machineRestartResult{}, err
	}
	m, err := h.request(ctx, "app.restart", machineRestartParams{AppID: h.record().AppID, FullRestart: full, Reason: "manual"})
	if err != nil {
		return machineRestartResult{}, fmt.Errorf("%s of run %s through flutter attach (run %s): %w", what(full), r.id, h.id, err)
	}
	if m.Error != "" {
		return machineRestartResult{}, fmt.Errorf("%s of run %s through flutter attach (run %s): %s", what(full), r.id, h.id, m.Error)
	}
	var res machineRestartResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return machineRestartResult{}, fmt.Errorf("%s of run %s: unexpected reply %s", what(full), r.id, m.Result)
	}
	return res, nil
}

// attachHelper returns the run's `flutter attach --machine`, starting it
// (in the app's workspace, with the attacher's environment) if there is
// none live: the tool that can recompile and reload the app now that its
// own is gone. --no-dds when the app's DDS still answers.
func (r *Run) attachHelper(ctx context.Context) (*Run, error) {
	r.mu.Lock()
	h := r.helper
	r.mu.Unlock()
	if h == nil || !h.live() {
		uri := r.record().VMServiceURI
		args := []string{"attach", "--machine", "--debug-uri", httpForm(uri)}
		var v map[string]any
		if r.CallVM(ctx, "getDartDevelopmentServiceVersion", nil, 0, &v) == nil {
			args = append(args, "--no-dds")
		}
		var err error
		if h, err = r.eng.Start(ctx, Spec{Kind: store.KindAttach, Root: r.root, Env: r.env, Args: args}); err != nil {
			return nil, fmt.Errorf("start flutter attach for run %s: %w", r.id, err)
		}
		r.mu.Lock()
		r.helper = h
		r.mu.Unlock()
		r.note("its own tool is gone: reloading it through flutter attach (run " + h.id + ")")
	}
	select {
	case <-h.Started():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if rec := h.record(); rec.State != stateRunning || rec.AppID == "" {
		return nil, fmt.Errorf("flutter attach for run %s did not attach (%s): see %s", r.id, rec.State, LogURI(store.KindAttach, h.id))
	}
	return h, nil
}

// stopDetach ends a flutter attach of flyd's without ending the app:
// app.detach, then the usual signals.
func (r *Run) stopDetach(ctx context.Context) error {
	if appID := r.record().AppID; appID != "" {
		rctx, cancel := context.WithTimeout(ctx, r.eng.cfg.StopGrace)
		_, _ = r.request(rctx, "app.detach", machineAppIDParams{AppID: appID})
		cancel()
		if r.wait(ctx, r.eng.cfg.StopGrace) {
			return nil
		}
	}
	return r.stop(ctx)
}

// httpForm is the http form of a VM-service WebSocket URI, as flutter
// attach's --debug-uri takes it: ws://h/TOKEN=/ws becomes http://h/TOKEN=/.
func httpForm(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	u.Scheme = "http"
	u.Path = strings.TrimSuffix(u.Path, "ws")
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String()
}
