// Package fakeupstream is an upstream MCP server for tests, built on the
// go-sdk: it stands in for dart mcp-server. It records each instance (a
// file per pid), the roots it was given, and starts a child process that
// stands in for the Dart analysis server, so that tests can count
// processes and check that none outlives flyd.
//
// Like fakeflutter it is a library: a test binary re-executes itself with
// FLY_TEST_HELPER=upstream (Main) or upstream-child (Child).
//
// Tools: echo {text}; roots (the roots it was given); slow {steps}
// (progress per step, until cancelled); crash (exits 3 after a line on
// stderr); sample (asks for a sampling/createMessage); log {text} (a
// logging notification); grow {text} (adds a tool named text); bump
// (resources/updated for fake://counter); subscriptions (what is
// subscribed now). Resources: fake://counter; template fake://item/{id}.
// Prompts: greet; confirm (asks to elicit a yes).
//
// Like dart mcp-server it speaks the handshake era only, unless EnvEras
// says "both": then it serves 2026-07-28 too. Its tools and prompts ask
// for input in their results (multi round-trip requests), which the SDK
// turns into requests for a client of the handshake era, so they work
// in either era.
package fakeupstream

// Roots, sampling and logging are deprecated from protocol 2026-07-28 on,
// but the upstreams flyd shares (dart mcp-server first) speak the
// session-ful versions and use them.
//lint:file-ignore SA1019 upstreams of the session-ful protocol use roots, sampling and logging

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvDir names the directory where instances record themselves:
// instances/<pid>, children/<pid>, roots/<pid>.
const EnvDir = "FAKE_UPSTREAM_DIR"

// EnvGate names a file the fake waits for before it answers anything:
// tests hold an upstream in its start with it.
const EnvGate = "FAKE_UPSTREAM_GATE"

// EnvChildMB makes the analysis child hold that many MiB of memory, as
// the real one holds gigabytes (for the memory benchmark).
const EnvChildMB = "FAKE_UPSTREAM_CHILD_MB"

// EnvEras "both" makes the fake serve MCP 2026-07-28 as well as the
// handshake era.
const EnvEras = "FAKE_UPSTREAM_ERAS"

// EnvStrict makes the fake exit when its first request is not
// initialize, as some servers of the handshake era end the session on
// any request before it.
const EnvStrict = "FAKE_UPSTREAM_STRICT"

// CounterURI is the subscribable resource.
const CounterURI = "fake://counter"

type empty struct{}

type textArgs struct {
	Text string `json:"text"`
}

type stepsArgs struct {
	Steps int  `json:"steps"`
	Burst bool `json:"burst,omitempty"` // every step's progress at once, then the answer
}

type textOut struct {
	Text string `json:"text"`
}

type listOut struct {
	Items []string `json:"items"`
}

// Main serves MCP on stdin and stdout until stdin ends.
func Main(getenv func(string) string) int {
	dir := getenv(EnvDir)
	pid := os.Getpid()
	record(dir, "instances", pid, "")
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), "FLY_TEST_HELPER=upstream-child")
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "fake upstream: start child:", err)
		return 1
	}
	record(dir, "children", child.Process.Pid, "")
	fmt.Fprintf(os.Stderr, "fake upstream %d started, child %d\n", pid, child.Process.Pid)

	var mu sync.Mutex
	subs := map[string]bool{}
	var versions []string
	if getenv(EnvEras) != "both" {
		for _, v := range mcp.SupportedProtocolVersions() {
			if v < "2026" {
				versions = append(versions, v)
			}
		}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake-upstream", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			mu.Lock()
			subs[r.Params.URI] = true
			mu.Unlock()
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, r *mcp.UnsubscribeRequest) error {
			mu.Lock()
			delete(subs, r.Params.URI)
			mu.Unlock()
			return nil
		},
		CompletionHandler: func(_ context.Context, r *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{r.Params.Argument.Value + "-done"}}}, nil
		},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo text."}, func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, textOut, error) {
		return nil, textOut(a), nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "roots", Description: "The roots the client gave."}, func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
		res, ok := req.Params.InputResponses["roots"].(*mcp.ListRootsResult)
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil, nil
		}
		var out []string
		for _, r := range res.Roots {
			out = append(out, r.URI)
		}
		record(dir, "roots", pid, strings.Join(out, "\n"))
		return structured(listOut{Items: out}), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Report progress each step until cancelled."}, func(ctx context.Context, req *mcp.CallToolRequest, a stepsArgs) (*mcp.CallToolResult, textOut, error) {
		for i := range a.Steps {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: float64(a.Steps), Message: "step " + strconv.Itoa(i+1)})
			}
			if a.Burst {
				continue
			}
			select {
			case <-ctx.Done():
				record(dir, "cancelled", pid, "")
				return nil, textOut{}, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		return nil, textOut{Text: "done"}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "crash", Description: "Exit at once."}, func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, textOut, error) {
		fmt.Fprintln(os.Stderr, "fake upstream crashing on purpose")
		os.Exit(3)
		return nil, textOut{}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample", Description: "Ask the client to sample."}, func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
		res, ok := req.Params.InputResponses["sample"].(*mcp.CreateMessageWithToolsResult)
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
				"sample": &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}},
			}}, nil, nil
		}
		var t *mcp.TextContent
		if len(res.Content) == 1 {
			t, _ = res.Content[0].(*mcp.TextContent)
		}
		if t == nil {
			return nil, nil, fmt.Errorf("sampled %v", res.Content)
		}
		return structured(textOut{Text: t.Text}), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "log", Description: "Send a log message."}, func(ctx context.Context, req *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, textOut, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: a.Text})
		return nil, textOut{Text: "logged"}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "bump", Description: "Change fake://counter."}, func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, textOut, error) {
		_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: CounterURI})
		return nil, textOut{Text: "bumped"}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "subscriptions", Description: "What is subscribed now."}, func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, listOut, error) {
		mu.Lock()
		defer mu.Unlock()
		out := []string{}
		for u := range subs {
			out = append(out, u)
		}
		slices.Sort(out)
		return nil, listOut{Items: out}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "grow", Description: "Add a tool named text (the server tells its clients the list changed)."}, func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, textOut, error) {
		mcp.AddTool(srv, &mcp.Tool{Name: a.Text, Description: "Grown."}, func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, textOut, error) {
			return nil, textOut{Text: "grown " + a.Text}, nil
		})
		return nil, textOut{Text: "grew"}, nil
	})
	srv.AddResource(&mcp.Resource{URI: CounterURI, Name: "counter", MIMEType: "text/plain"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "count"}}}, nil
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "fake://item/{id}", Name: "item"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "item " + strings.TrimPrefix(r.Params.URI, "fake://item/")}}}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name"}}}, func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + r.Params.Arguments["name"]}}}}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "confirm", Description: "Asks the user to confirm."}, func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		res, ok := r.Params.InputResponses["confirm"].(*mcp.ElicitResult)
		if !ok {
			return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Sure?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"sure": map[string]any{"type": "boolean"}}}}}}, nil
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "confirmed: " + res.Action}}}}, nil
	})
	if gate := getenv(EnvGate); gate != "" {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(gate); err == nil {
				break
			}
		}
	}
	var in io.Reader = os.Stdin
	if getenv(EnvStrict) != "" {
		in = strictStart(os.Stdin)
	}
	err := srv.Run(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(in), Writer: os.Stdout})
	_ = child.Process.Kill()
	_ = child.Wait()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake upstream:", err)
	}
	return 0
}

// structured is a tool result of v, as JSON text and structured content.
func structured(v any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: v}
}

// strictStart reads the first line of r and exits, as a strict server of
// the handshake era does, unless it is an initialize request; it returns
// a reader of the whole input.
func strictStart(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	line, err := br.ReadBytes('\n')
	var msg struct {
		Method string `json:"method"`
	}
	if err == nil && json.Unmarshal(line, &msg) == nil && msg.Method != "initialize" {
		fmt.Fprintf(os.Stderr, "fake upstream: %s before initialize: exiting\n", msg.Method)
		os.Exit(4)
	}
	return io.MultiReader(bytes.NewReader(line), br)
}

// Child stands in for the analysis server: it holds EnvChildMB MiB and
// waits to be killed.
func Child() int {
	mb, _ := strconv.Atoi(os.Getenv(EnvChildMB))
	held := make([]byte, mb<<20)
	for i := 0; i < len(held); i += 4096 {
		held[i] = 1 // resident, not just reserved
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
	runtime.KeepAlive(held)
	return 0
}

func record(dir, kind string, pid int, content string) {
	if dir == "" {
		return
	}
	d := filepath.Join(dir, kind)
	_ = os.MkdirAll(d, 0o755)
	_ = os.WriteFile(filepath.Join(d, strconv.Itoa(pid)), []byte(content), 0o644)
}

// PIDs returns the pids recorded under dir/kind.
func PIDs(dir, kind string) []int {
	es, _ := os.ReadDir(filepath.Join(dir, kind))
	var out []int
	for _, e := range es {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
