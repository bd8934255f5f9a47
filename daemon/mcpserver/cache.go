package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Caching hints (ttlMs, cacheScope) on every result that carries them.
// fly's data is one user's: the scope is always private, never the
// protocol's default public. How long a result stays fresh follows how it
// changes: lists of files and runs, and every read (files, logs, errors,
// the project, sessions), change with the workspace and are stale at
// once; the tool, prompt and template lists change only when an upstream
// server's do, which list_changed announces.

// Freshness of the results that do not change with files.
const (
	listTTL     = time.Minute      // tools, prompts, templates
	discoverTTL = 10 * time.Minute // server/discover: flyd's own capabilities
)

// cacheHint is the caching hint of a result of method.
func cacheHint(method string) mcp.Cacheable {
	c := mcp.Cacheable{CacheScope: "private"}
	switch method {
	case "tools/list", "prompts/list", "resources/templates/list":
		c.TTLMs = int(listTTL / time.Millisecond)
	case "server/discover":
		c.TTLMs = int(discoverTTL / time.Millisecond)
	}
	return c
}

// setCacheable is the SDK's hook for the results it builds.
func setCacheable(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	*c = cacheHint(methodOf(req))
}

// methodOf names the method of a request the SDK hands the hook.
func methodOf(req mcp.Request) string {
	switch req.(type) {
	case *mcp.ListToolsRequest:
		return "tools/list"
	case *mcp.ListPromptsRequest:
		return "prompts/list"
	case *mcp.ListResourceTemplatesRequest:
		return "resources/templates/list"
	case *mcp.ListResourcesRequest:
		return "resources/list"
	case *mcp.ReadResourceRequest:
		return "resources/read"
	}
	return "server/discover"
}

// withCacheHint sets the hint on a result flyd built itself, or took
// from an upstream, which the SDK's hook never sees.
func withCacheHint(method string, res mcp.Result) {
	var c *mcp.Cacheable
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		c = &r.Cacheable
	case *mcp.ListPromptsResult:
		c = &r.Cacheable
	case *mcp.ListResourceTemplatesResult:
		c = &r.Cacheable
	case *mcp.ListResourcesResult:
		c = &r.Cacheable
	case *mcp.ReadResourceResult:
		c = &r.Cacheable
	case *mcp.DiscoverResult:
		c = &r.Cacheable
	default:
		return
	}
	*c = cacheHint(method)
}
