//go:build unix

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On Windows flyd's endpoint is a named pipe, with no file or directory
// another user could have made or could replace: a dial there refuses a
// pipe served by another user instead (internal/ipc's check).

// TestMCPRefusesUntrustedSocket: flyctl mcp sends nothing, not even its
// environment, to a socket that another user could have put in place.
func TestMCPRefusesUntrustedSocket(t *testing.T) {
	for _, tc := range []struct {
		name     string
		needRoot bool
		setup    func(t *testing.T, dir, sock string)
	}{
		{"world-writable directory", false, func(t *testing.T, dir, sock string) { os.Chmod(dir, 0o777) }},
		{"another user's socket", true, func(t *testing.T, dir, sock string) {
			if err := os.Lchown(sock, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}},
		{"another user's directory", true, func(t *testing.T, dir, sock string) {
			if err := os.Chown(dir, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needRoot && os.Getuid() != 0 {
				t.Skip("needs root to give files to another uid")
			}
			base := mcpTempDir(t)
			dir := filepath.Join(base, "run")
			os.Mkdir(dir, 0o700)
			sock := filepath.Join(dir, "flyd.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			accepted := make(chan struct{}, 1)
			go func() { // owned by the test: ends when ln closes
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					accepted <- struct{}{}
					c.Close()
				}
			}()
			defer ln.Close()
			tc.setup(t, dir, sock)
			getenv := mcpEnv(base, "FLY_SOCKET", sock)
			var stdout, stderr bytes.Buffer
			err = run(context.Background(), []string{"mcp", "--workspace", base, "--reconnect-timeout", "0"}, getenv,
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`+"\n"), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), "not safe") {
				t.Errorf("flyctl mcp = %v, want a refusal saying the socket is not safe", err)
			}
			select {
			case <-accepted:
				t.Error("flyctl mcp connected to the untrusted socket")
			default:
			}
		})
	}
}
