package localapi

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/fly-dev/fly/daemon/inspect"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/internal/wire"
)

// screenshot answers GET /v1/runs/{id}/screenshot[?max_width=N&max_bytes=N]
// with the PNG of what the run's app shows (the engine's
// _flutter.screenshot), scaled down only when asked; X-Fly-Width and
// X-Fly-Height give its size, X-Fly-Full-Width and -Height the app's.
func (a *API) screenshot(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := onlyParams(q, "max_width", "max_bytes"); err != nil {
		return err
	}
	opt := inspect.ShotOptions{MaxWidth: 16384, MaxBytes: 32 << 20}
	for k, p := range map[string]*int{"max_width": &opt.MaxWidth, "max_bytes": &opt.MaxBytes} {
		if v := q.Get(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 16 || n > *p {
				return badRequest("%s=%q is not a number from 16 to %d", k, v, *p)
			}
			*p = n
		}
	}
	rn, err := a.find(r)
	if err != nil {
		return err
	}
	if !rn.Live() || rn.Record().VMServiceURI == "" {
		return &apiError{code: http.StatusConflict, msg: "run " + rn.ID() + " has no VM service to take a screenshot from (ended, a release build, or not a flutter run)"}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	var res struct {
		Screenshot string `json:"screenshot"`
	}
	if err := rn.CallVM(ctx, "_flutter.screenshot", nil, 0, &res); err != nil {
		if errors.Is(err, runs.ErrNoVMService) {
			return &apiError{code: http.StatusServiceUnavailable, msg: "flyd is not connected to the app's VM service right now", hint: "try again in a moment"}
		}
		return &apiError{code: http.StatusBadGateway, msg: "the app gave no screenshot: " + err.Error()}
	}
	raw, err := base64.StdEncoding.DecodeString(res.Screenshot)
	if err != nil || len(raw) == 0 {
		return &apiError{code: http.StatusBadGateway, msg: "the app sent no screenshot"}
	}
	shot, err := inspect.Scale(raw, opt)
	if err != nil {
		return &apiError{code: http.StatusBadGateway, msg: err.Error()}
	}
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("Cache-Control", "no-store")
	h.Set(wire.HeaderWidth, strconv.Itoa(shot.Width))
	h.Set(wire.HeaderHeight, strconv.Itoa(shot.Height))
	h.Set(wire.HeaderFullWidth, strconv.Itoa(shot.FullWidth))
	h.Set(wire.HeaderFullHeight, strconv.Itoa(shot.FullHeight))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(shot.PNG)
	return nil
}
