package daemon

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a client says about itself is shown in flyctl status, the
// dashboard, fly://sessions/*, the store and flyd's log. It is bounded
// where it enters (initialize), before the SDK keeps it.
const (
	maxClientName    = 128
	maxClientVersion = 64
	maxClientText    = 256  // title, description, website
	maxClientExtras  = 4096 // encoded experimental capabilities, extensions, _meta
	maxLogValue      = 256  // a client's string in flyd's log
)

// boundText returns s without control characters or invalid UTF-8, cut
// to at most n bytes on a rune boundary (with "…" when cut).
func boundText(s string, n int) string {
	clean := func(s string) bool {
		for _, r := range s {
			if r == utf8.RuneError || unicode.IsControl(r) {
				return false
			}
		}
		return true
	}
	if len(s) <= n && clean(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > n-len("…") {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// boundInitialize bounds, in place, what a client's initialize carries
// that the SDK keeps for the session's life.
func boundInitialize(p *mcp.InitializeParams) {
	if p == nil {
		return
	}
	if c := p.ClientInfo; c != nil {
		c.Name = boundText(c.Name, maxClientName)
		c.Version = boundText(c.Version, maxClientVersion)
		c.Title = boundText(c.Title, maxClientText)
		c.Description = boundText(c.Description, maxClientText)
		c.WebsiteURL = boundText(c.WebsiteURL, maxClientText)
		c.Icons = nil // never shown
	}
	large := func(v any) bool {
		b, err := json.Marshal(v)
		return err != nil || len(b) > maxClientExtras
	}
	if c := p.Capabilities; c != nil {
		if large(c.Experimental) {
			c.Experimental = nil
		}
		if large(c.Extensions) {
			c.Extensions = nil
		}
	}
	if large(p.Meta) {
		p.Meta = nil
	}
}
