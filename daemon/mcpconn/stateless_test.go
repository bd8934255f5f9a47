package mcpconn

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzParseStateless: whatever a client posts, ParseStateless answers it
// or lets it through, never both and never with a panic; what it lets
// through is a request of a version flyd speaks, whose header and _meta
// agree.
func FuzzParseStateless(f *testing.F) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta+`}}`, "2026-07-28")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{`+meta+`}}`, "2026-07-28")
	f.Add(`{"jsonrpc":"2.0","method":"notifications/cancelled"}`, "2026-07-28")
	f.Add(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":7}}}`, "2026-07-28")
	f.Fuzz(func(t *testing.T, body, version string) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set(ProtocolHeader, version)
		w := httptest.NewRecorder()
		req, ok := ParseStateless(w, r, []byte(body))
		answered := w.Code != http.StatusOK || w.Body.Len() > 0
		if ok == answered {
			t.Fatalf("ParseStateless(%q, %q) = %v, and it answered %d %q", body, version, ok, w.Code, w.Body)
		}
		if ok && (req.Version != version || !slices.Contains(mcp.SupportedProtocolVersions(), req.Version) || removedMethods[req.Method] || !req.IsCall()) {
			t.Fatalf("ParseStateless(%q, %q) let through %+v", body, version, req)
		}
	})
}
