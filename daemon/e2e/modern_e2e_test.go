package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon/mcpserver"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernClient speaks MCP 2026-07-28 to a shim in raw JSON-RPC lines: no
// SDK between the test and what goes over the wire.
type modernClient struct {
	p    *shimProc
	seen []map[string]any // notifications read while waiting for something else
}

// modernMeta is the _meta every 2026-07-28 request carries.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw-modern","version":"9"},"io.modelcontextprotocol/clientCapabilities":{}}`

// send writes a request: params is the JSON object's members without
// _meta, which send adds.
func (c *modernClient) send(t *testing.T, id, method, params string) {
	t.Helper()
	if params != "" {
		params += ","
	}
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":%q,"params":{%s%s}}`, id, method, params, modernMeta)
	if _, err := io.WriteString(c.p.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// next reads one message.
func (c *modernClient) next(t *testing.T) map[string]any {
	t.Helper()
	c.p.stdout.SetReadDeadline(time.Now().Add(60 * time.Second))
	b, err := c.p.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read the shim's stdout: %v\n%s", err, c.p.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("shim wrote %q: %v", b, err)
	}
	return m
}

// reply reads until the reply to id, keeping the notifications on the way.
func (c *modernClient) reply(t *testing.T, id string) map[string]any {
	t.Helper()
	for {
		m := c.next(t)
		if m["id"] == id && m["method"] == nil {
			if e := m["error"]; e != nil {
				t.Fatalf("%s failed: %v", id, e)
			}
			return m["result"].(map[string]any)
		}
		if m["method"] != nil && m["id"] == nil {
			c.seen = append(c.seen, m)
		}
	}
}

// call sends a request and returns its result.
func (c *modernClient) call(t *testing.T, id, method, params string) map[string]any {
	t.Helper()
	c.send(t, id, method, params)
	return c.reply(t, id)
}

// notification reads until a notification of method (among those seen
// already, first) whose params satisfy ok, and returns its params.
func (c *modernClient) notification(t *testing.T, method string, ok func(params map[string]any) bool) map[string]any {
	t.Helper()
	for i, m := range c.seen {
		if p, _ := m["params"].(map[string]any); m["method"] == method && ok(p) {
			c.seen = slices.Delete(c.seen, i, i+1)
			return p
		}
	}
	for {
		m := c.next(t)
		p, _ := m["params"].(map[string]any)
		if m["method"] == method && ok(p) {
			return p
		}
		if m["method"] != nil && m["id"] == nil {
			c.seen = append(c.seen, m)
		}
	}
}

// subscriptionID is the listen stream id a notification carries.
func subscriptionID(params map[string]any) any {
	meta, _ := params["_meta"].(map[string]any)
	return meta[mcp.MetaKeySubscriptionID]
}

// TestModernClientThroughShim: a client of MCP 2026-07-28, in raw lines
// through the real shim: server/discover, stateless calls (flutter_run
// among them), a subscriptions/listen stream that hears of a new file
// and of a change to the file it named, and nothing it did not ask for;
// after a flyd restart the shim sends the stream again and it goes on.
func TestModernClientThroughShim(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	e.WithFakeFlutter(t)
	first := flytest.StartFlyd(t, e)
	root := flutterProject(t)
	falseBin, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false binary")
	}
	c := &modernClient{p: newShimProc(t, e, root, "--flyd", falseBin)}
	if err := c.p.cmd.Start(); err != nil {
		t.Fatal(err)
	}

	disc := c.call(t, "d", "server/discover", "")
	if v, _ := disc["supportedVersions"].([]any); !slices.Contains(v, any("2026-07-28")) || !slices.Contains(v, any("2025-11-25")) {
		t.Fatalf("server/discover versions = %v, want both eras", disc["supportedVersions"])
	}
	caps, _ := disc["capabilities"].(map[string]any)
	if res, _ := caps["resources"].(map[string]any); res["subscribe"] != true || res["listChanged"] != true {
		t.Fatalf("server/discover capabilities = %v", caps)
	}
	if disc["cacheScope"] != "private" {
		t.Fatalf("server/discover cacheScope = %v, want private", disc["cacheScope"])
	}

	const mainURI = "workspace:///lib/main.dart"
	c.send(t, "L", "subscriptions/listen", `"notifications":{"resourcesListChanged":true,"resourceSubscriptions":["`+mainURI+`"]}`)
	ack := c.notification(t, "notifications/subscriptions/acknowledged", func(p map[string]any) bool { return subscriptionID(p) == "L" })
	var agreed mcp.NotificationSubscriptions
	if b, _ := json.Marshal(ack["notifications"]); json.Unmarshal(b, &agreed) != nil || !agreed.ResourcesListChanged ||
		agreed.ToolsListChanged || !slices.Equal(agreed.ResourceSubscriptions, []string{mainURI}) {
		t.Fatalf("listen acknowledged %s", b)
	}

	run := c.call(t, "r", "tools/call", `"name":"flutter_run","arguments":{}`)
	var started mcpserver.RunResult
	if b, _ := json.Marshal(run["structuredContent"]); json.Unmarshal(b, &started) != nil || started.RunID == "" || run["isError"] == true {
		t.Fatalf("a stateless flutter_run returned %v", run)
	}
	cur := c.call(t, "s", "resources/read", `"uri":"fly://sessions/current"`)
	if b, _ := json.Marshal(cur); !strings.Contains(string(b), `raw-modern`) {
		t.Fatalf("fly://sessions/current does not name the client from _meta: %s", b)
	}

	stamped := func(p map[string]any) bool { return subscriptionID(p) == "L" }
	writeTree(t, root, map[string]string{"lib/new_page.dart": "class NewPage {}\n"})
	c.notification(t, "notifications/resources/list_changed", stamped)
	writeTree(t, root, map[string]string{"lib/main.dart": "void main() { print(1); }\n"})
	c.notification(t, "notifications/resources/updated", func(p map[string]any) bool { return stamped(p) && p["uri"] == mainURI })

	// flyd restarts: the call after it succeeds without any handshake,
	// and the stream, sent again by the shim, is acknowledged anew.
	first.Kill(t)
	flytest.StartFlyd(t, e)
	runs := c.call(t, "after", "tools/call", `"name":"runs_list","arguments":{}`)
	if b, _ := json.Marshal(runs); !strings.Contains(string(b), started.RunID) {
		t.Fatalf("runs_list after the restart lacks run %s: %s", started.RunID, b)
	}
	c.notification(t, "notifications/subscriptions/acknowledged", stamped)
	writeTree(t, root, map[string]string{"lib/second.dart": "class Second {}\n"})
	c.notification(t, "notifications/resources/list_changed", stamped)

	// The client asked for resource list changes and one file: anything
	// else, or anything without its stream's id, is noise it never wanted.
	for _, m := range c.seen {
		p, _ := m["params"].(map[string]any)
		switch m["method"] {
		case "notifications/resources/list_changed", "notifications/subscriptions/acknowledged":
		case "notifications/resources/updated":
			if p["uri"] != mainURI {
				t.Errorf("told of %v, which it never listened for", p["uri"])
			}
		default:
			t.Errorf("got %v, which it never listened for", m["method"])
		}
		if !stamped(p) {
			t.Errorf("%v carries no id of the listen stream: %v", m["method"], p)
		}
	}
}

// TestModernHTTPErrors: over Streamable HTTP, a 2026-07-28 request with
// a missing or mismatched header gets the error the transport defines,
// and what the era dropped (GET streams, batches) is refused plainly.
func TestModernHTTPErrors(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	f := startTCPFlyd(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n"})
	endpoint := "http://" + f.addr + wire.RouteStreamable + "?workspace=" + url.QueryEscape(root)
	meta := func(version string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientInfo":{"name":"h","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	}
	call := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `}}`
	}
	toolsList := call("tools/list", meta("2026-07-28"))
	flutterRun := call("tools/call", `"name":"runs_list","arguments":{},`+meta("2026-07-28"))
	good := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
	with := func(h map[string]string, k, v string) map[string]string {
		out := maps.Clone(h)
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name, method, body string
		headers            map[string]string
		status             int
		code               int64 // of the JSON-RPC error; 0 for a plain HTTP refusal
	}{
		{"ok", "POST", toolsList, good, 200, 0},
		{"no version header", "POST", toolsList, with(good, "Mcp-Protocol-Version", ""), 400, mcp.CodeHeaderMismatch},
		{"header and _meta differ", "POST", call("tools/list", meta("2025-11-25")), good, 400, mcp.CodeHeaderMismatch},
		{"no _meta version", "POST", call("tools/list", ""), good, 400, jsonrpc.CodeInvalidParams},
		{"unknown version", "POST", call("tools/list", meta("2099-01-01")), with(good, "Mcp-Protocol-Version", "2099-01-01"), 400, mcp.CodeUnsupportedProtocolVersion},
		{"no Mcp-Method", "POST", toolsList, with(good, "Mcp-Method", ""), 400, mcp.CodeHeaderMismatch},
		{"Mcp-Method differs", "POST", toolsList, with(good, "Mcp-Method", "prompts/list"), 400, mcp.CodeHeaderMismatch},
		{"no Mcp-Name", "POST", flutterRun, with(good, "Mcp-Method", "tools/call"), 400, mcp.CodeHeaderMismatch},
		{"Mcp-Name differs", "POST", flutterRun, with(with(good, "Mcp-Method", "tools/call"), "Mcp-Name", "flutter_run"), 400, mcp.CodeHeaderMismatch},
		{"Mcp-Name", "POST", flutterRun, with(with(good, "Mcp-Method", "tools/call"), "Mcp-Name", "runs_list"), 200, 0},
		{"batch", "POST", "[" + toolsList + "]", good, 400, 0},
		{"GET stream", "GET", "", good, 405, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, endpoint, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+f.token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.code == 0 {
				if tt.status == 200 && !strings.Contains(string(body), `"result"`) {
					t.Fatalf("no result: %s", body)
				}
				return
			}
			var r struct {
				ID    any `json:"id"`
				Error struct {
					Code int64 `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &r); err != nil || r.Error.Code != tt.code || r.ID != float64(1) {
				t.Fatalf("reply %s, want a JSON-RPC error %d for id 1", body, tt.code)
			}
		})
	}
}
