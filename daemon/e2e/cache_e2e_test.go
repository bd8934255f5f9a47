package e2e

import (
	"context"
	"testing"

	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCachingHints: every result that carries a caching hint says it is
// private (one user's data), fresh for a while for the lists that change
// only with upstreams, and stale at once for what changes with files.
func TestCachingHints(t *testing.T) {
	t.Parallel() // its own flyd: it waits mostly, so it overlaps the others
	e := flytest.NewEnv(t)
	flytest.StartFlyd(t, e)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pubspec.yaml": "name: demo\n", "lib/main.dart": "void main() {}\n"})
	cs := viaShim(e)(t, "cacher", root, nil)
	ctx := context.Background()
	check := func(what string, c mcp.Cacheable, ttl int) {
		t.Helper()
		if c.CacheScope != "private" || c.TTLMs != ttl {
			t.Errorf("%s: cacheScope %q, ttlMs %d; want private, %d", what, c.CacheScope, c.TTLMs, ttl)
		}
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("tools/list", tools.Cacheable, 60_000)
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("prompts/list", prompts.Cacheable, 60_000)
	tmpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("resources/templates/list", tmpl.Cacheable, 60_000)
	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("resources/list", list.Cacheable, 0)
	for _, uri := range []string{"workspace:///lib/main.dart", "fly://project/overview", "fly://project/modules", "fly://sessions/current"} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		check(uri, res.Cacheable, 0)
	}
}
