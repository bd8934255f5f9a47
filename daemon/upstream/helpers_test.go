package upstream_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeupstream"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// The end-to-end tests of upstreams run the real flyd and shim; the fake
// upstream is this test binary, run again as FLY_TEST_HELPER=upstream
// (or =silent, for one that never answers).
func TestMain(m *testing.M) {
	switch os.Getenv("FLY_TEST_HELPER") {
	case "upstream":
		os.Exit(fakeupstream.Main(os.Getenv))
	case "upstream-child":
		os.Exit(fakeupstream.Child())
	case "silent": // an upstream that never answers: a line on stderr, then nothing
		fmt.Fprintln(os.Stderr, "waking up, slowly")
		time.Sleep(100000 * time.Second)
		os.Exit(0)
	}
	before := goleak.IgnoreCurrent()
	code := m.Run()
	flytest.Cleanup()
	if code == 0 {
		if err := goleak.Find(before); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	getStatus = flytest.Status
	writeTree = flytest.WriteTree
)

// listAll pages through resources/list and returns every URI in order.
func listAll(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	var uris []string
	params := &mcp.ListResourcesParams{}
	for {
		res, err := cs.ListResources(context.Background(), params)
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		if res.NextCursor == "" {
			return uris
		}
		params = &mcp.ListResourcesParams{Cursor: res.NextCursor}
	}
}

func readText(t testing.TB, cs *mcp.ClientSession, uri string) string {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	return res.Contents[0].Text
}

// kill sends SIGKILL (on Windows: terminates) to process pid; a process
// that is gone already is an error.
func kill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
