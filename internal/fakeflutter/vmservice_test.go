package fakeflutter

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/vmservice"
)

// errorData is the part of a Flutter.Error's extensionData the tests read.
type errorData struct {
	Description       string `json:"description"`
	ErrorsSinceReload int    `json:"errorsSinceReload"`
	RenderedErrorText string `json:"renderedErrorText"`
	Properties        []struct {
		Type        string `json:"type"`
		Description string `json:"description"`
		Children    []struct {
			Description string `json:"description"`
		} `json:"children"`
	} `json:"properties"`
}

func decodeError(t *testing.T, e vmservice.Event) errorData {
	t.Helper()
	if e.ExtensionKind != "Flutter.Error" || !strings.HasPrefix(e.Isolate.ID, "isolates/") || e.Timestamp == 0 {
		t.Fatalf("event %+v is not a Flutter.Error of an isolate", e)
	}
	var d errorData
	if err := json.Unmarshal(e.ExtensionData, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// eventQueue hands out a connection's events by stream, keeping those
// of other streams for later.
type eventQueue struct {
	c       *vmservice.Conn
	pending []vmservice.Event
}

// next returns the next event of stream.
func (q *eventQueue) next(t *testing.T, stream string) vmservice.Event {
	t.Helper()
	for i, e := range q.pending {
		if e.StreamID == stream {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			return e
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		e, ok := q.c.Next(ctx)
		if !ok {
			t.Fatalf("no %s event within 10s (the connection: %v)", stream, q.c.Err())
		}
		if e.StreamID == stream {
			return e
		}
		q.pending = append(q.pending, e)
	}
}

// nextError is the next Flutter.Error, past the frames.
func (q *eventQueue) nextError(t *testing.T) vmservice.Event {
	t.Helper()
	for {
		if e := q.next(t, "Extension"); e.ExtensionKind == "Flutter.Error" {
			return e
		}
	}
}

// TestVMServiceErrors: a debug run serves a VM service at the app.debugPort
// URI that posts Flutter.Error events as the framework does (the whole
// text first, then "Another exception was thrown", the count reset by a
// reload), keeps DDS's history, registers flutter_tools' reload services,
// and starts a new isolate on a hot restart; stdout holds no error text.
func TestVMServiceErrors(t *testing.T) {
	s := startRun(t, map[string]string{EnvErrorsAtStart: "overflow,overflow", EnvErrorsOnReload: "build"})
	ws, _ := s.event("app.debugPort").Params["wsUri"].(string)
	appID, _ := s.event("app.started").Params["appId"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := vmservice.Dial(ctx, ws, vmservice.Options{})
	if err != nil {
		t.Fatalf("dial the app.debugPort URI %q: %v", ws, err)
	}
	defer c.Close()
	q := &eventQueue{c: c}

	// A first streamListen replays the history, as DDS does; the errors
	// thrown at start come in it or right after.
	for _, stream := range []string{"Extension", "Service", "Isolate"} {
		if err := c.StreamListen(ctx, stream); err != nil {
			t.Fatal(err)
		}
	}
	first, second := decodeError(t, q.nextError(t)), decodeError(t, q.nextError(t))
	if first.ErrorsSinceReload != 0 || !strings.HasPrefix(first.RenderedErrorText, "══╡ EXCEPTION CAUGHT BY RENDERING LIBRARY ╞═") ||
		!strings.Contains(first.RenderedErrorText, "A RenderFlex overflowed by 42 pixels on the right.") || first.Description != "Exception caught by rendering library" {
		t.Errorf("first error = %+v", first)
	}
	if second.ErrorsSinceReload != 1 || second.RenderedErrorText != "Another exception was thrown: A RenderFlex overflowed by 42 pixels on the right." {
		t.Errorf("second error = %d %q", second.ErrorsSinceReload, second.RenderedErrorText)
	}
	var widget string
	for _, p := range first.Properties {
		if p.Type == "DiagnosticsBlock" && len(p.Children) == 1 {
			widget = p.Children[0].Description
		}
	}
	if !strings.HasPrefix(widget, "Row Row:file:///") || !strings.HasSuffix(widget, "/lib/main.dart:30:12") {
		t.Errorf("the error-causing widget is %q, want Row Row:file:///…/lib/main.dart:30:12", widget)
	}
	// The first frame is posted after the errors, maybe after they came:
	// once it is here, the history holds it too.
	for q.next(t, "Extension").ExtensionKind != "Flutter.Frame" {
	}
	hist, err := c.StreamHistory(ctx, "Extension")
	var kinds []string
	for _, e := range hist {
		kinds = append(kinds, e.ExtensionKind)
	}
	if want := []string{"Flutter.Error", "Flutter.Error", "Flutter.FirstFrame", "Flutter.Frame"}; err != nil || !slices.Equal(kinds, want) ||
		decodeError(t, hist[1]).ErrorsSinceReload != 1 {
		t.Errorf("Extension history = %v, %v; want the 2 errors thrown at start, then the first frame", kinds, err)
	}
	var e *vmservice.Error
	if _, err := c.StreamHistory(ctx, "Isolate"); !errors.As(err, &e) || e.Code != vmservice.CodeInvalidParams {
		t.Errorf("Isolate history = %v, want -32602", err)
	}
	reg := q.next(t, "Service")
	if reg.Kind != "ServiceRegistered" || reg.Service != "reloadSources" || reg.Method != "s0.reloadSources" || reg.Alias != "Flutter Tools" {
		t.Errorf("Service replay = %+v", reg)
	}

	// A reload through the daemon protocol resets the count.
	s.send(`[{"id":7,"method":"app.restart","params":{"appId":"` + appID + `","fullRestart":false}}]`)
	if d := decodeError(t, q.nextError(t)); d.ErrorsSinceReload != 0 || !strings.HasPrefix(d.RenderedErrorText, "══╡ EXCEPTION CAUGHT BY WIDGETS LIBRARY ╞") {
		t.Errorf("the error after a reload = %d %.60q, want the whole text of the build exception", d.ErrorsSinceReload, d.RenderedErrorText)
	}
	if f := q.next(t, "Extension"); f.ExtensionKind != "Flutter.Frame" {
		t.Errorf("after the reload's error: %s, want the frame drawn with the new code", f.ExtensionKind)
	}

	// A hot restart through the registered service starts a new isolate.
	var before struct{ Isolates []vmservice.IsolateRef }
	if err := c.Call(ctx, "getVM", nil, &before); err != nil || len(before.Isolates) != 1 {
		t.Fatalf("getVM = %+v, %v", before, err)
	}
	if err := c.Call(ctx, "s0.hotRestart", map[string]any{"pause": false}, nil); err != nil {
		t.Fatalf("s0.hotRestart = %v", err)
	}
	exit, start := q.next(t, "Isolate"), q.next(t, "Isolate")
	if exit.Kind != "IsolateExit" || exit.Isolate.ID != before.Isolates[0].ID || start.Kind != "IsolateStart" || start.Isolate.ID == exit.Isolate.ID {
		t.Errorf("hot restart: %+v then %+v, want the old isolate's exit and a new one's start", exit, start)
	}
	if d := decodeError(t, q.nextError(t)); d.ErrorsSinceReload != 0 || d.Description != "Exception caught by widgets library" {
		t.Errorf("the error after a restart = %+v", d)
	}

	s.send(`[{"id":8,"method":"app.stop","params":{"appId":"` + appID + `"}}]`)
	s.wait()
	for _, l := range s.seen {
		if strings.Contains(l, "EXCEPTION CAUGHT") || strings.Contains(l, "Another exception") {
			t.Errorf("flutter run --machine printed framework error text: %.100s", l)
		}
	}
}

// TestVMServiceWebErrors: on the web, where structured errors are off,
// the same errors are text blocks in the app's log.
func TestVMServiceWebErrors(t *testing.T) {
	s := startRun(t, map[string]string{EnvErrorsAtStart: "nullcheck,nullcheck"}, "-d", "chrome")
	first := s.next("the error block", func(l string) bool { return strings.Contains(l, "EXCEPTION CAUGHT BY GESTURE") })
	if !strings.Contains(first, "Null check operator used on a null value") || !strings.Contains(first, "package:") {
		t.Errorf("web error block = %.200s", first)
	}
	s.next("the repeat", func(l string) bool {
		return strings.Contains(l, "Another exception was thrown: Null check operator used on a null value")
	})
}
