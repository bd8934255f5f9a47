package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawHTTP is one MCP request over flyd's Streamable HTTP, in raw JSON:
// no SDK between the test and what a hostile client could send.
type rawHTTP struct {
	addr, token string
}

// post sends body with headers and returns the status and the body.
func (c rawHTTP) do(t testing.TB, method, query string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+c.addr+wire.RouteStreamable+query, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// modern sends a 2026-07-28 request as a client named name (version 1)
// on root, with X-Fly-Client who unless it is "".
func (c rawHTTP) modern(t testing.TB, root, who, name, method, params string) (int, string) {
	t.Helper()
	meta := fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":%q,"version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`, name)
	if params != "" {
		params += ","
	}
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	_ = json.Unmarshal([]byte("{"+strings.TrimSuffix(params, ",")+"}"), &p)
	if p.Name != "" {
		h["Mcp-Name"] = p.Name
	} else if p.URI != "" {
		h["Mcp-Name"] = p.URI
	}
	if who != "" {
		h[wire.HeaderClient] = who
	}
	return c.do(t, "POST", "?workspace="+url.QueryEscape(root), h, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+params+meta+`}}`)
}

// toolCall is a tools/call of name with args (a JSON object) as a
// 2026-07-28 client: its text and whether it failed.
func (c rawHTTP) toolCall(t testing.TB, root, who, client, name, args string, out ...any) (string, bool) {
	t.Helper()
	status, body := c.modern(t, root, who, client, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, name, args))
	if status != http.StatusOK {
		return fmt.Sprintf("HTTP %d: %s", status, body), true
	}
	if i := strings.Index(body, "data: "); i >= 0 { // an event stream of one message
		body = strings.TrimSpace(body[i+len("data: "):])
	}
	var r struct {
		Result *mcp.CallToolResult `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("tools/call %s: %v: %s", name, err, body)
	}
	if r.Error != nil {
		return r.Error.Message, true
	}
	if len(out) > 0 {
		b, _ := json.Marshal(r.Result.StructuredContent)
		if err := json.Unmarshal(b, out[0]); err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
	}
	return toolText(r.Result), r.Result.IsError
}

// TestSessionIDsNotShown: whatever a second client can read of another
// session (fly://sessions/recent and current, /v1/status, runs_list's
// claims and news) names it by a handle that does not work as its
// Mcp-Session-Id: a tools/call and a DELETE with any string it saw
// fail, while the real id works.
func TestSessionIDsNotShown(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	flytest.StartFlyd(t, e)
	st, err := getStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	f := &tcpFlyd{e: e, addr: st.HTTP}
	f.token = f.readToken(t)
	root := flutterProject(t)
	legacy := func() *notes { n := newNotes(); n.version = legacyVersion; return n }
	victim := viaStreamable(f)(t, "victim", root, legacy())
	vid := victim.ID()
	if vid == "" {
		t.Fatal("the victim has no Mcp-Session-Id")
	}
	var run mcpserver.RunResult
	if res := callTool(t, victim, "flutter_run", nil, &run); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	t.Cleanup(func() { callTool(t, victim, "flutter_stop", map[string]any{"run_id": run.RunID, "force": true}, nil) })
	if res := callTool(t, victim, "flutter_claim", map[string]any{"note": "mine"}, nil); res.IsError {
		t.Fatalf("claim: %s", toolText(res))
	}
	// A session that ended is in the recent ones too.
	gone := viaStreamable(f)(t, "gone", root, legacy())
	goneID := gone.ID()
	gone.Close()
	flytest.Eventually(t, "the closed session in fly://sessions/recent", func() bool {
		st, err := getStatus(e)
		return err == nil && len(st.Sessions) == 1
	})

	attacker := viaStreamable(f)(t, "attacker", root, legacy())
	var seen []string
	for _, uri := range []string{"fly://sessions/recent", "fly://sessions/current"} {
		text, _ := readText(t, attacker, uri)
		seen = append(seen, text)
	}
	seen = append(seen, toolText(callTool(t, attacker, "runs_list", nil, nil)))
	seen = append(seen, toolText(callTool(t, attacker, "flutter_hot_reload", map[string]any{"run_id": run.RunID}, nil))) // claimed by …
	resp, err := (&http.Client{Transport: bearer{Token: f.token, Base: http.DefaultTransport}}).Get("http://" + f.addr + wire.RouteStatus)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	seen = append(seen, string(b))
	all := strings.Join(seen, "\n")
	if !strings.Contains(all, "victim") {
		t.Fatalf("the attacker saw nothing of the victim:\n%s", all)
	}
	for _, id := range []string{vid, goneID} {
		if strings.Contains(all, id) {
			t.Errorf("a session's Mcp-Session-Id %s is shown to another client", id)
		}
	}

	c := rawHTTP{f.addr, f.token}
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"runs_list","arguments":{}}}`
	as := func(id string) map[string]string {
		return map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": legacyVersion}
	}
	if status, body := c.do(t, "POST", "", as(vid), call); status != http.StatusOK {
		t.Fatalf("the victim's own id: tools/call %d %s", status, body)
	}
	tried := 0
	for _, w := range candidates(all) {
		tried++
		if status, _ := c.do(t, "POST", "", as(w), call); status == http.StatusOK {
			t.Errorf("tools/call as %q, which another client saw: 200", w)
		}
		if status, _ := c.do(t, "DELETE", "", as(w), ""); status == http.StatusNoContent {
			t.Errorf("DELETE as %q, which another client saw: 204", w)
		}
	}
	t.Logf("tried %d strings the attacker saw as Mcp-Session-Id", tried)
	if res := callTool(t, victim, "runs_list", nil, nil); res.IsError {
		t.Fatalf("the victim's session after the attempts: %s", toolText(res))
	}
}

// candidates are the words of text that could be a session id: runs of
// letters, digits, '-', '_' and '.', at least 6 long.
func candidates(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) {
		if len(w) >= 6 && len(w) <= 128 && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// TestStatelessClientsNotMerged: two 2026-07-28 clients over HTTP that
// give the same clientInfo are not one session. Without X-Fly-Client
// neither can claim (or, if one could, the other's reload is refused);
// with it, only the one that sends the same value acts as the holder.
func TestStatelessClientsNotMerged(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	flytest.StartFlyd(t, e)
	st, err := getStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	f := &tcpFlyd{e: e, addr: st.HTTP}
	f.token = f.readToken(t)
	c := rawHTTP{f.addr, f.token}
	root := flutterProject(t)
	const editor = "same-editor"

	var run mcpserver.RunResult
	if text, failed := c.toolCall(t, root, "", editor, "flutter_run", "{}", &run); failed || run.RunID == "" {
		t.Fatalf("flutter_run: %s", text)
	}
	id := run.RunID
	t.Cleanup(func() { c.toolCall(t, root, "", editor, "flutter_stop", `{"run_id":"`+id+`","force":true}`) })
	reload := `{"run_id":"` + id + `"}`

	// Window A claims without a client identity; window B, same name and
	// version, reloads.
	claimText, claimFailed := c.toolCall(t, root, "", editor, "flutter_claim", `{"note":"window A"}`)
	if claimFailed {
		if !strings.Contains(claimText, wire.HeaderClient) {
			t.Errorf("a claim without %s is refused without saying why: %s", wire.HeaderClient, claimText)
		}
	} else if text, failed := c.toolCall(t, root, "", editor, "flutter_hot_reload", reload); !failed {
		t.Fatalf("window B reloaded through window A's claim (A: %s): %s", claimText, text)
	} else {
		c.toolCall(t, root, "", editor, "flutter_claim", `{"release":true,"force":true}`)
	}

	// With X-Fly-Client: A claims; B (no header, or another one) is
	// refused; A, on a later request with its value, is the holder.
	if text, failed := c.toolCall(t, root, "window-a-secret", editor, "flutter_claim", `{"note":"window A"}`); failed {
		t.Fatalf("claim with %s: %s", wire.HeaderClient, text)
	}
	for _, who := range []string{"", "window-b-secret"} {
		if text, failed := c.toolCall(t, root, who, editor, "flutter_hot_reload", reload); !failed || !strings.Contains(text, "claimed by") {
			t.Errorf("reload by %q under A's claim = %v: %s", who, failed, text)
		}
	}
	if text, failed := c.toolCall(t, root, "window-a-secret", editor, "flutter_hot_reload", reload); failed {
		t.Errorf("A's own reload under its claim: %s", text)
	}
}

// TestListenStreamsCapped: subscriptions/listen streams over HTTP, each
// of which holds a connection, are capped per session and in all below
// the TCP listener's connection cap: with more of them asked for than
// that cap, the ones past the caps are refused at once, and a normal
// request and the dashboard are still served.
func TestListenStreamsCapped(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.MaxFiles = 128 // the TCP listener holds 64 connections
	flytest.StartFlyd(t, e)
	st, err := getStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	f := &tcpFlyd{e: e, addr: st.HTTP}
	f.token = f.readToken(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n"})
	const connCap = 64

	// Each stream on a connection of its own, as a client holding many
	// would have them.
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	listen := func(who string) (open bool, refusal string) {
		t.Helper()
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"listener","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
		req, err := http.NewRequest("POST", "http://"+f.addr+wire.RouteStreamable+"?workspace="+url.QueryEscape(root),
			strings.NewReader(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"resourcesListChanged":true},`+meta+`}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		if who != "" {
			req.Header.Set(wire.HeaderClient, who)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return false, err.Error() // refused at the connection cap
		}
		buf := make([]byte, 0, 4096)
		for !strings.Contains(string(buf), "\n\n") && len(buf) < cap(buf) { // the first event, or the whole error
			n, err := resp.Body.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err != nil {
				break
			}
		}
		if strings.Contains(string(buf), "subscriptions/acknowledged") {
			t.Cleanup(func() { resp.Body.Close() })
			return true, ""
		}
		resp.Body.Close()
		return false, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, buf)
	}

	var open int
	var refusals []string
	for range 10 { // one session: 8 at most
		if ok, why := listen("one-client"); ok {
			open++
		} else {
			refusals = append(refusals, why)
		}
	}
	if open != 8 || len(refusals) != 2 || !strings.Contains(refusals[0], "streams open") {
		t.Fatalf("one session opened %d listen streams; refused: %q", open, refusals)
	}
	for range connCap + 16 { // each a session of its own
		if ok, why := listen(""); ok {
			open++
		} else {
			refusals = append(refusals, why)
		}
	}
	if open >= connCap/2 || !strings.Contains(refusals[len(refusals)-1], "streams open over HTTP") {
		t.Fatalf("%d listen streams held open; the last refusal: %q", open, refusals[len(refusals)-1])
	}
	t.Logf("%d listen streams open, %d refused", open, len(refusals))

	c := rawHTTP{f.addr, f.token}
	if status, body := c.modern(t, root, "", "other", "tools/list", ""); status != http.StatusOK || !strings.Contains(body, "runs_list") {
		t.Fatalf("tools/list while the streams are open: %d %s", status, body)
	}
	resp, err := (&http.Client{Transport: bearer{Token: f.token, Base: tr}}).Get("http://" + f.addr + "/dashboard/")
	if err != nil {
		t.Fatalf("the dashboard while the streams are open: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the dashboard while the streams are open: %d", resp.StatusCode)
	}
}

// TestOtherWorkspacesRuns: a session acts on a run of a workspace it
// does not serve only by naming it; it can neither claim that run nor
// override a claim on it, and what it does is shown to the run's own
// sessions as from another workspace.
func TestOtherWorkspacesRuns(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	flytest.StartFlyd(t, e)
	home, away := flutterProject(t), flutterProject(t)
	a := viaShim(e)(t, "home-agent", home, nil)
	b := viaShim(e)(t, "away-agent", away, nil)
	var run mcpserver.RunResult
	if res := callTool(t, a, "flutter_run", nil, &run); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	t.Cleanup(func() { callTool(t, a, "flutter_stop", map[string]any{"run_id": run.RunID, "force": true}, nil) })
	named := map[string]any{"run_id": run.RunID}

	if res := callTool(t, b, "flutter_hot_reload", nil, nil); !res.IsError {
		t.Errorf("a reload without run_id from another workspace reached a run: %s", toolText(res))
	}
	if res := callTool(t, b, "flutter_claim", named, nil); !res.IsError || !strings.Contains(toolText(res), "another workspace") {
		t.Errorf("a claim from another workspace = %v: %s", res.IsError, toolText(res))
	}
	if res := callTool(t, b, "flutter_claim", map[string]any{"run_id": run.RunID, "force": true}, nil); !res.IsError {
		t.Errorf("a forced claim from another workspace: %s", toolText(res))
	}
	if res := callTool(t, a, "flutter_claim", map[string]any{"note": "home work"}, nil); res.IsError {
		t.Fatalf("the home session's claim: %s", toolText(res))
	}
	if res := callTool(t, b, "flutter_hot_reload", map[string]any{"run_id": run.RunID, "force": true}, nil); !res.IsError || !strings.Contains(toolText(res), "another workspace") {
		t.Errorf("a forced reload from another workspace over a claim = %v: %s", res.IsError, toolText(res))
	}
	if res := callTool(t, a, "flutter_claim", map[string]any{"release": true}, nil); res.IsError {
		t.Fatalf("release: %s", toolText(res))
	}
	if res := callTool(t, b, "flutter_hot_reload", named, nil); res.IsError {
		t.Fatalf("a named reload from another workspace: %s", toolText(res))
	}
	if text := toolText(callTool(t, a, "flutter_errors", nil, nil)); !strings.Contains(text, "hot-reloaded this run") || !strings.Contains(text, "from another workspace") {
		t.Errorf("the home session was not told of the reload from another workspace:\n%s", text)
	}
}

// TestStatelessFloodSparesClaims: 300 stateless clients (each with an
// X-Fly-Client of its own, some named with 3 MB) fill the HTTP session
// table: the ones past it get 503 with why, and none ends the session
// that holds a claim, whose next call still works. Each client's
// session key is bounded whatever its name: flyd's RSS is logged.
func TestStatelessFloodSparesClaims(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	fl := flytest.StartFlyd(t, e)
	st, err := getStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	f := &tcpFlyd{e: e, addr: st.HTTP}
	f.token = f.readToken(t)
	root := flutterProject(t)
	legacy := newNotes()
	legacy.version = legacyVersion
	victim := viaStreamable(f)(t, "victim", root, legacy)
	var run mcpserver.RunResult
	if res := callTool(t, victim, "flutter_run", nil, &run); res.IsError {
		t.Fatalf("flutter_run: %s", toolText(res))
	}
	t.Cleanup(func() { callTool(t, victim, "flutter_stop", map[string]any{"run_id": run.RunID, "force": true}, nil) })
	if res := callTool(t, victim, "flutter_claim", map[string]any{"note": "mine"}, nil); res.IsError {
		t.Fatalf("claim: %s", toolText(res))
	}
	rss := func() int {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", fl.Cmd.Process.Pid))
		if err != nil {
			return 0
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
				return kb >> 10
			}
		}
		return 0
	}
	before := rss()
	c := rawHTTP{f.addr, f.token}
	huge := strings.Repeat("n", 3<<20)
	var ok, full int
	var refusal string
	for i := range 300 {
		name := "flood"
		if i < 32 {
			name = huge
		}
		status, body := c.modern(t, root, fmt.Sprintf("flood-%d", i), name, "tools/list", "")
		switch status {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
			full++
			refusal = body
		default:
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	t.Logf("flyd RSS %d MB before, %d MB after %d stateless sessions (32 named with 3 MB); %d refused: %s", before, rss(), ok, full, strings.TrimSpace(refusal))
	if full == 0 || !strings.Contains(refusal, "too many MCP sessions") {
		t.Errorf("%d of 300 stateless clients refused; the last refusal: %q", full, refusal)
	}
	if res := callTool(t, victim, "runs_list", nil, nil); res.IsError {
		t.Fatalf("the claim holder's session after the flood: %s", toolText(res))
	}
	var list mcpserver.RunsListResult
	callTool(t, victim, "runs_list", nil, &list)
	if len(list.Runs) != 1 || list.Runs[0].Claim == nil || list.Runs[0].Claim.Note != "mine" {
		t.Errorf("the claim after the flood: %+v", list.Runs)
	}
}
