package upstream_test

//lint:file-ignore SA1019 upstreams of the handshake era use roots, sampling and logging

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeupstream"
	"github.com/fly-dev/fly/internal/fileuri"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeEnv is the fake upstream's environment, with more variables.
func fakeEnv(dir string, kv ...string) map[string]string {
	env := map[string]string{"FLY_TEST_HELPER": "upstream", fakeupstream.EnvDir: dir}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// upstreamStatus waits for the one upstream's status to be running and
// returns it.
func upstreamStatus(t *testing.T, e *flytest.Env) wire.Upstream {
	t.Helper()
	var up wire.Upstream
	eventually(t, "the upstream running", func() bool {
		st, err := getStatus(e)
		if err != nil || len(st.Upstreams) != 1 {
			return false
		}
		up = st.Upstreams[0]
		return up.State == "running"
	})
	return up
}

// modernClient is a go-sdk client of MCP 2026-07-28 through a real shim:
// it samples, elicits (declining) and has one root of its own. With raw,
// the SDK hands it input_required results instead of answering them.
func modernClient(t *testing.T, u *upEnv, name, ws string, raw bool) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if raw {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	return modernClientWith(t, u, name, ws, opts)
}

// modernClientWith is modernClient with more options.
func modernClientWith(t *testing.T, u *upEnv, name, ws string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	opts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "sampled by " + name}}, nil
	}
	opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts)
	client.AddRoots(&mcp.Root{URI: "file:///client/" + name, Name: name})
	_, flyctl := flytest.Binaries(t)
	cmd := exec.Command(flyctl, "mcp", "--workspace", ws)
	cmd.Env = u.e.Vars
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolText(t *testing.T, cs *mcp.ClientSession, tool string) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("%s = %+v, %v", tool, res, err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func promptText(t *testing.T, cs *mcp.ClientSession, prompt string) string {
	t.Helper()
	res, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: prompt})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("%s = %+v, %v", prompt, res, err)
	}
	return res.Messages[0].Content.(*mcp.TextContent).Text
}

// TestUpstreamModernEra: an upstream that speaks 2026-07-28 is spoken to
// in it. Its requests for input reach a client of that era as the
// upstream made them (its own keys, so the client answers them itself,
// its roots included), and a client of the handshake era as requests,
// but for roots, which flyd answers with the workspace; its log reaches
// the handshake-era client at the level that client set.
func TestUpstreamModernEra(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	dir := t.TempDir()
	u := startUpEnv(t, map[string]any{"env": fakeEnv(dir, fakeupstream.EnvEras, "both")})
	ws := newWorkspace(t)
	legacy := u.connect(t, "legacy", ws)
	modern := modernClient(t, u, "modern", ws, false)
	raw := modernClient(t, u, "raw", ws, true)

	if got := callText(t, legacy, "fake_echo", map[string]any{"text": "hi"}); got != `{"text":"hi"}` {
		t.Fatalf("fake_echo = %s", got)
	}
	if up := upstreamStatus(t, u.e); up.Protocol != "2026-07-28" {
		t.Fatalf("the upstream is spoken to at %q, want 2026-07-28", up.Protocol)
	}

	// The handshake-era client is asked, as before; flyd gives the roots.
	if got := callText(t, legacy, "fake_sample", nil); got != `{"text":"sampled by legacy"}` {
		t.Fatalf("fake_sample for the handshake-era client = %s", got)
	}
	root, _ := filepath.EvalSymlinks(ws)
	if got, want := callText(t, legacy, "fake_roots", nil), fileuri.FromPath(root); got != `{"items":["`+want+`"]}` {
		t.Fatalf("fake_roots for the handshake-era client = %s, want the workspace %s", got, want)
	}
	if got := promptText(t, legacy.cs, "fake_confirm"); got != "confirmed: decline" {
		t.Fatalf("fake_confirm for the handshake-era client = %q", got)
	}
	if err := legacy.cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	callText(t, legacy, "fake_log", map[string]any{"text": "careful"})
	if got := waitFor(t, "the upstream's log", legacy.logs); got != "careful" {
		t.Fatalf("log = %q", got)
	}

	// The 2026-07-28 client answers what the upstream asks, roots
	// included: its own, not the workspace.
	if got := toolText(t, modern, "fake_sample"); got != `{"text":"sampled by modern"}` {
		t.Fatalf("fake_sample for the 2026-07-28 client = %s", got)
	}
	if got := toolText(t, modern, "fake_roots"); got != `{"items":["file:///client/modern"]}` {
		t.Fatalf("fake_roots for the 2026-07-28 client = %s, want its own root", got)
	}
	if got := promptText(t, modern, "fake_confirm"); got != "confirmed: decline" {
		t.Fatalf("fake_confirm for the 2026-07-28 client = %q", got)
	}

	// The upstream's notifications, which it sends on listen streams of
	// flyd's: a resource's updates reach the subscribers of both eras,
	// and a tool list's change the sessions of both.
	modernUpdated, modernTools := make(chan string, 10), make(chan struct{}, 10)
	listener := modernClientWith(t, u, "listener", ws, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { modernUpdated <- r.Params.URI },
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { modernTools <- struct{}{} },
	})
	if err := legacy.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: fakeupstream.CounterURI}); err != nil {
		t.Fatal(err)
	}
	if err := listener.Subscribe(context.Background(), &mcp.SubscribeParams{URI: fakeupstream.CounterURI}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the upstream subscribed", func() bool {
		return callText(t, legacy, "fake_subscriptions", nil) == `{"items":["`+fakeupstream.CounterURI+`"]}`
	})
	callText(t, legacy, "fake_bump", nil)
	if got := waitFor(t, "the legacy client's update", legacy.updated); got != fakeupstream.CounterURI {
		t.Fatalf("updated %s", got)
	}
	// The 2026-07-28 client's Subscribe is a subscriptions/listen stream,
	// which flyd may take only after Subscribe returned (a stress run saw
	// it 40 ms after the bump): the counter is bumped again until the
	// update comes.
	eventually(t, "the modern client's update", func() bool {
		select {
		case got := <-modernUpdated:
			if got != fakeupstream.CounterURI {
				t.Fatalf("updated %s", got)
			}
			return true
		case <-time.After(500 * time.Millisecond): // an update comes in milliseconds once subscribed
			callText(t, legacy, "fake_bump", nil)
			return false
		}
	})
	for len(legacy.tools) > 0 {
		<-legacy.tools
	}
	callText(t, legacy, "fake_grow", map[string]any{"text": "sprout"})
	waitFor(t, "the legacy client told the tools changed", legacy.tools)
	waitFor(t, "the modern client told the tools changed", modernTools)
	if got := toolText(t, listener, "fake_sprout"); got != `{"text":"grown sprout"}` {
		t.Fatalf("fake_sprout = %s", got)
	}

	// It gets the upstream's own input_required result, and its answer
	// goes back as it gave it.
	res, err := raw.CallTool(context.Background(), &mcp.CallToolParams{Name: "fake_sample"})
	if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 || res.InputRequests["sample"] == nil {
		t.Fatalf("fake_sample, answered by hand = %+v, %v; want the upstream's request under its key \"sample\"", res, err)
	}
	res, err = raw.CallTool(context.Background(), &mcp.CallToolParams{Name: "fake_sample", RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"sample": &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "by hand"}}}})
	if err != nil || res.NeedsInput() || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != `{"text":"by hand"}` {
		t.Fatalf("fake_sample's retry = %+v, %v", res, err)
	}
}

// TestUpstreamHandshakeEraFallback: an upstream of the handshake era that
// exits on a request before initialize (server/discover) is started
// again at once in that era, and serves.
func TestUpstreamHandshakeEraFallback(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	dir := t.TempDir()
	u := startUpEnv(t, map[string]any{"env": fakeEnv(dir, fakeupstream.EnvStrict, "1")})
	c := u.connect(t, "a", newWorkspace(t))
	if got := callText(t, c, "fake_echo", map[string]any{"text": "hi"}); got != `{"text":"hi"}` {
		t.Fatalf("fake_echo = %s", got)
	}
	up := upstreamStatus(t, u.e)
	if up.Protocol != "2025-11-25" || up.Restarts != 0 {
		t.Fatalf("upstream = %+v; want it at 2025-11-25, and the try at 2026-07-28 not counted as a restart", up)
	}
	if n := len(fakeupstream.PIDs(dir, "instances")); n != 2 {
		t.Fatalf("%d upstream processes started, want 2 (one asked server/discover)", n)
	}
}

// TestUpstreamPinnedEra: "protocol": "2025-11-25" keeps an upstream that
// speaks both eras in the handshake era. A 2026-07-28 client then gets
// its requests for input relayed under flyd's keys, for prompts as for
// tools, and answers them by itself.
func TestUpstreamPinnedEra(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	dir := t.TempDir()
	u := startUpEnv(t, map[string]any{"env": fakeEnv(dir, fakeupstream.EnvEras, "both"), "protocol": "2025-11-25"})
	ws := newWorkspace(t)
	modern := modernClient(t, u, "modern", ws, false)
	raw := modernClient(t, u, "raw", ws, true)
	if got := toolText(t, modern, "fake_sample"); got != `{"text":"sampled by modern"}` {
		t.Fatalf("fake_sample = %s", got)
	}
	if up := upstreamStatus(t, u.e); up.Protocol != "2025-11-25" {
		t.Fatalf("the pinned upstream is spoken to at %q", up.Protocol)
	}
	if got := promptText(t, modern, "fake_confirm"); got != "confirmed: decline" {
		t.Fatalf("fake_confirm, relayed = %q", got)
	}
	res, err := raw.CallTool(context.Background(), &mcp.CallToolParams{Name: "fake_sample"})
	keys := slices.Collect(func(yield func(string) bool) {
		for k := range res.InputRequests {
			yield(k)
		}
	})
	if err != nil || !res.NeedsInput() || len(keys) != 1 || !strings.HasPrefix(keys[0], "input-") || !strings.HasPrefix(res.RequestState, "fly-") {
		t.Fatalf("fake_sample, relayed = %+v, %v; want one request under flyd's key, with flyd's state", res, err)
	}
	// A state flyd did not give is refused.
	_, err = raw.CallTool(context.Background(), &mcp.CallToolParams{Name: "fake_sample", RequestState: "fly-forged",
		InputResponses: mcp.InputResponseMap{keys[0]: &mcp.CreateMessageResult{Role: "assistant", Content: &mcp.TextContent{Text: "x"}}}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("a forged requestState = %v, want -32602", err)
	}
}

// TestUpstreamAsksOnTheCallsStream: over Streamable HTTP, an upstream's
// sampling request in the middle of a handshake-era client's call goes
// to the client on that call's own stream, where the era puts a request
// that belongs to one, and the answer finishes the call. The client never
// opens its GET stream, so nothing can go astray there.
func TestUpstreamAsksOnTheCallsStream(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	u := startUpEnv(t, nil)
	hc := u.e.HTTPClient()
	hc.Timeout = 0 // the call's stream stays open while it waits; the context bounds it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	endpoint := "http://flyd/mcp?workspace=" + url.QueryEscape(newWorkspace(t))
	session := ""
	post := func(body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("POST %.80s: %v %v", body, err, resp)
		}
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	session = resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp = post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()

	call := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fake_sample","arguments":{}}}`)
	defer call.Body.Close()
	events := bufio.NewScanner(call.Body)
	events.Buffer(make([]byte, 1<<20), 1<<20)
	next := func() map[string]any {
		t.Helper()
		for events.Scan() {
			if data, ok := strings.CutPrefix(events.Text(), "data: "); ok {
				var msg map[string]any
				if err := json.Unmarshal([]byte(data), &msg); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				return msg
			}
		}
		t.Fatalf("the call's stream ended: %v", events.Err())
		return nil
	}
	ask := next()
	if ask["method"] != "sampling/createMessage" {
		t.Fatalf("the call's stream carried %v first, want the upstream's sampling request", ask)
	}
	id, _ := json.Marshal(ask["id"])
	answer := post(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"role":"assistant","model":"m","content":{"type":"text","text":"on the stream"}}}`)
	answer.Body.Close()
	res := next()
	if b, _ := json.Marshal(res); res["id"] != float64(2) || !strings.Contains(string(b), `on the stream`) {
		t.Fatalf("the call's result = %s", b)
	}
}

// modernPost sends one 2026-07-28 request over Streamable HTTP on e's
// socket and returns its response, whose body the caller reads.
func modernPost(ctx context.Context, t *testing.T, hc *http.Client, endpoint, method, name, params string) *http.Response {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	if params != "" {
		meta += "," + params
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + meta + `}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %v %v", method, err, resp)
	}
	return resp
}

// TestListenKeepsItsStreamOverHTTP: a 2026-07-28 client over stateless
// HTTP whose listen stream waits in its subscription (here, for an
// upstream still starting) while another of its requests comes and goes
// still hears, on that stream, of the resource it subscribed to. Each
// request has a connection of its own; the listen stream must be filed
// under its own, not under whichever of the client's came last.
func TestListenKeepsItsStreamOverHTTP(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	dir, gate := t.TempDir(), filepath.Join(t.TempDir(), "gate")
	u := startUpEnv(t, map[string]any{"env": fakeEnv(dir, fakeupstream.EnvGate, gate)})
	hc := u.e.HTTPClient()
	hc.Timeout = 0 // the listen stream stays open; the context bounds it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	endpoint := "http://flyd/mcp?workspace=" + url.QueryEscape(newWorkspace(t))

	// The listen's answer (its headers) comes with its acknowledgement,
	// after its subscription: it is read on a goroutine of its own.
	listenReq, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
			`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},`+
			`"notifications":{"resourceSubscriptions":["`+fakeupstream.CounterURI+`"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	listenReq.Header.Set("Content-Type", "application/json")
	listenReq.Header.Set("Accept", "application/json, text/event-stream")
	listenReq.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	listenReq.Header.Set("Mcp-Method", "subscriptions/listen")
	frames := make(chan string, 16)
	go func() { // owned by the test: ends with the listen, which ctx ends
		defer close(frames)
		resp, err := hc.Do(listenReq)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				frames <- data
			}
		}
	}()
	// The listen waits for the upstream, which waits for the gate.
	eventually(t, "the upstream starting", func() bool {
		st, err := getStatus(u.e)
		return err == nil && len(st.Upstreams) == 1 && st.Upstreams[0].State == "starting"
	})
	// Meanwhile another request of the same client comes and goes.
	other := modernPost(ctx, t, hc, endpoint, "tools/call", "files_find", `"name":"files_find","arguments":{"pattern":"**"}`)
	io.Copy(io.Discard, other.Body)
	other.Body.Close()

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	next := func(what string) string {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("the listen stream ended before %s", what)
			}
			return f
		case <-ctx.Done():
			t.Fatalf("no %s on the listen stream", what)
		}
		return ""
	}
	if f := next("acknowledgement"); !strings.Contains(f, "notifications/subscriptions/acknowledged") {
		t.Fatalf("the listen stream began with %s", f)
	}
	bump := modernPost(ctx, t, hc, endpoint, "tools/call", "fake_bump", `"name":"fake_bump","arguments":{}`)
	io.Copy(io.Discard, bump.Body)
	bump.Body.Close()
	if f := next("resources/updated"); !strings.Contains(f, "notifications/resources/updated") || !strings.Contains(f, fakeupstream.CounterURI) {
		t.Fatalf("the listen stream carried %s, want the counter's update", f)
	}
}
