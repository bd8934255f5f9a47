package mcpconn

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fly-dev/fly/internal/safetext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestBoundText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"claude-code", 128, "claude-code"},
		{"a\x1b[31mb\nc", 128, "a[31mbc"},
		{"naïve", 128, "naïve"},
		{"bad\xffutf8", 128, "badutf8"},
		{strings.Repeat("x", 20), 10, "xxxxxxx…"},
		{"ééééé", 8, "éé…"},
		{"claude\u202e-code\u200b\u2028\u2029\ufeff\u2066", 128, "claude-code"},
	} {
		if got := BoundText(tc.in, tc.n); got != tc.want {
			t.Errorf("BoundText(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// FuzzBoundText: whatever a client sends, what flyd keeps is valid UTF-8,
// holds no control or format character and fits the bound.
func FuzzBoundText(f *testing.F) {
	f.Add("claude-code\x00\x1b", 16)
	f.Add("ééé\xff", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = 4 + (n&0xff)%200
		got := BoundText(s, n)
		if len(got) > n || !utf8.ValidString(got) || strings.ContainsFunc(got, safetext.Unsafe) {
			t.Fatalf("BoundText(%q, %d) = %q", s, n, got)
		}
	})
}

// TestBoundInitializeMessage: the rewrite cuts what a client says of
// itself and drops what nobody reads, and keeps capabilities as sent: an
// empty object stays empty (the SDK would read "roots": {} as roots).
func TestBoundInitializeMessage(t *testing.T) {
	huge := strings.Repeat("x", 100_000)
	for _, tc := range []struct{ in, want string }{
		{`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-code","version":"2.1"}}`,
			`{"capabilities":{},"clientInfo":{"name":"claude-code","version":"2.1"},"protocolVersion":"2025-06-18"}`},
		{`{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true},"sampling":{},"experimental":{"a":"` + huge + `"}},"clientInfo":{"name":"a\u001b` + huge + `","version":"1"},"unread":"` + huge + `","_meta":{"k":"` + huge + `"}}`,
			`{"capabilities":{"roots":{"listChanged":true},"sampling":{}},"clientInfo":{"name":"a` + strings.Repeat("x", MaxClientName-len("a…")) + `…","version":"1"},"protocolVersion":"2025-06-18"}`},
	} {
		id, _ := jsonrpc.MakeID(float64(1))
		got := BoundInitializeMessage(&jsonrpc.Request{ID: id, Method: "initialize", Params: json.RawMessage(tc.in)})
		if p := string(got.(*jsonrpc.Request).Params); p != tc.want {
			t.Errorf("BoundInitializeMessage(%.80s…) = %.300s, want %.300s", tc.in, p, tc.want)
		}
	}
}

// FuzzBoundInitializeMessage: whatever initialize params a client sends,
// the rewrite is valid JSON whose client name and version fit their
// bounds, or the message as it came (which the SDK then refuses).
func FuzzBoundInitializeMessage(f *testing.F) {
	f.Add(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`)
	f.Add(`{"clientInfo":{"name":"\u0000\u001b` + strings.Repeat("é", 200) + `"},"capabilities":[]}`)
	f.Add(`[1,2]`)
	f.Fuzz(func(t *testing.T, params string) {
		in := &jsonrpc.Request{Method: "initialize", Params: json.RawMessage(params)}
		out := BoundInitializeMessage(in).(*jsonrpc.Request)
		if out == in {
			return
		}
		var p struct {
			ClientInfo *struct{ Name, Version string } `json:"clientInfo"`
		}
		if err := json.Unmarshal(out.Params, &p); err != nil {
			t.Fatalf("rewrite of %q is not JSON: %v", params, err)
		}
		if c := p.ClientInfo; c != nil && (len(c.Name) > MaxClientName || len(c.Version) > MaxClientVersion) {
			t.Fatalf("rewrite of %q keeps %d/%d bytes of name/version", params, len(c.Name), len(c.Version))
		}
	})
}
