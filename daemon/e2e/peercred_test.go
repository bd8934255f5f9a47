package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/fakeupstream"
)

// runHelper runs the test binary as a helper process (see TestMain).
func runHelper(mode string) int {
	switch mode {
	case "dial":
		// GET /v1/status over FLY_TEST_SOCKET and print what came back.
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", os.Getenv("FLY_TEST_SOCKET"))
			},
		}}
		resp, err := c.Get("http://flyd/v1/status")
		if err != nil {
			fmt.Println("refused:", err)
			return 0
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("answered: %s %s\n", resp.Status, b)
		return 0
	case "stdio-server":
		return runStdioServer()
	case "bare-relay":
		return runBareRelay()
	case "flutter":
		return fakeflutter.Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	case "upstream":
		return fakeupstream.Main(os.Getenv)
	case "upstream-child":
		return fakeupstream.Child()
	case "hostile-vm":
		return runHostileVM()
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", mode)
	return 2
}
