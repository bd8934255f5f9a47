package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/flytest"
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
	var started runOut
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
