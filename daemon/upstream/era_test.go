package upstream

//lint:file-ignore SA1019 upstreams of either era are asked for roots, sampling and logging

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/fly-dev/fly/internal/mcpconfig"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// request is a client's request as outMeta sees it.
type request struct {
	version string
	caps    *mcp.ClientCapabilities
}

func (r request) GetSession() mcp.Session                     { return nil }
func (r request) ProtocolVersion() string                     { return r.version }
func (r request) ClientCapabilities() *mcp.ClientCapabilities { return r.caps }

// session is a sharing session without an SDK session (a handshake-era
// client's capabilities are then unknown).
type session struct{}

func (session) ID() string              { return "s" }
func (session) Root() string            { return "/w" }
func (session) Env() map[string]string  { return nil }
func (session) Notify(string, any)      {}
func (session) MCP() *mcp.ServerSession { return nil }

func TestOutMeta(t *testing.T) {
	client := mcp.Meta{
		mcp.MetaKeyProtocolVersion:    "2026-07-28",
		mcp.MetaKeyClientInfo:         map[string]any{"name": "editor", "version": "1"},
		mcp.MetaKeyClientCapabilities: map[string]any{"sampling": map[string]any{}},
		mcp.MetaKeyLogLevel:           "info",
		"progressToken":               "t1",
		"com.example/trace":           "abc",
	}
	sampler := &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}
	for _, tc := range []struct {
		name     string
		req      ClientRequest // nil: a handshake-era client
		modernUp bool
		want     string
	}{
		{"modern client, modern upstream: its own capabilities", request{"2026-07-28", sampler}, true,
			`{"com.example/trace":"abc","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`},
		{"modern client with roots, modern upstream", request{"2026-07-28", &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}}}, true,
			`{"com.example/trace":"abc","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}`},
		{"modern client, handshake-era upstream: flyd answers roots", request{"2026-07-28", sampler}, false,
			`{"com.example/trace":"abc","io.modelcontextprotocol/clientCapabilities":{"roots":{},"sampling":{}}}`},
		{"handshake-era client, modern upstream: roots, every log level", nil, true,
			`{"com.example/trace":"abc","io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/logLevel":"debug"}`},
		{"handshake-era client and upstream", nil, false,
			`{"com.example/trace":"abc","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.req != nil {
				ctx = WithRequest(ctx, tc.req)
			}
			b, err := json.Marshal(outMeta(ctx, session{}, tc.modernUp, client))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("outMeta = %s, want %s", b, tc.want)
			}
		})
	}
}

// TestProtocolVersionsKnown: the revisions an upstream's "protocol" may
// name (checked where flyctl writes the file, which cannot import the
// SDK) are those flyd speaks, and the offer of an unpinned upstream is
// the newest, falling back to the newest of the handshake era.
func TestProtocolVersionsKnown(t *testing.T) {
	sdk := mcp.SupportedProtocolVersions()
	slices.Sort(sdk)
	if !slices.Equal(sdk, mcpconfig.ProtocolVersions) {
		t.Fatalf("mcpconfig.ProtocolVersions = %v, the SDK speaks %v", mcpconfig.ProtocolVersions, sdk)
	}
	if newest := sdk[len(sdk)-1]; newest != wire.SessionlessRevision {
		t.Errorf("the SDK's newest revision is %s: offer it (wire.SessionlessRevision is %s)", newest, wire.SessionlessRevision)
	}
	if got := legacyVersion(); got != "2025-11-25" {
		t.Errorf("legacyVersion() = %s, want 2025-11-25", got)
	}
}
