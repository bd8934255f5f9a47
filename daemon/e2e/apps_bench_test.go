package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fly-dev/fly/daemon"
	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkDiscovery: 20 apps started outside fly, one after another, in
// a served workspace (the fake flutter run --machine with its DTD, as an
// IDE starts it): the time from each DTD file's write (its mtime) to the
// app in flyd's list (what runs_list returns). Reports p50 and p99 in ms.
func BenchmarkDiscovery(b *testing.B) {
	const apps = 20
	dartHome := b.TempDir()
	s, hc, root, flutter := benchFlyd(b, daemon.Config{DTDDir: filepath.Join(dartHome, "dtd")})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(b.Context(), apiWS{hc, root}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	var lat []time.Duration
	for b.Loop() {
		var procs []*exec.Cmd
		for i := range apps {
			cmd := exec.Command(flutter, "run", "--machine", "-d", "linux")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "FLY_TEST_HELPER=flutter", "DART_DATA_HOME="+dartHome, fakeflutter.EnvDTD+"=1", fakeflutter.EnvTickMS+"=0")
			stdin, _ := cmd.StdinPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			procs = append(procs, cmd)
			defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
			// Wait on flyd's own signal of a status change (what the
			// dashboard's event stream follows, before its coalescing);
			// the latency runs from the DTD file's write, its mtime.
			deadline := time.After(time.Minute)
			for {
				changed := s.NextChange()
				if slices.ContainsFunc(s.Status().Apps, func(a wire.App) bool { return a.Workspace == root && a.DTDPID == cmd.Process.Pid }) {
					break
				}
				select {
				case <-changed:
				case <-deadline:
					b.Fatalf("app %d was not found within a minute", i+1)
				}
			}
			found := time.Now()
			fi, err := os.Stat(filepath.Join(dartHome, "dtd", strconv.Itoa(cmd.Process.Pid)))
			if err != nil {
				b.Fatalf("app %d is listed, but its DTD file: %v", i+1, err)
			}
			lat = append(lat, found.Sub(fi.ModTime()))
		}
		for _, p := range procs {
			p.Process.Kill()
		}
	}
	b.ReportMetric(float64(p50(lat).Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(p99(lat).Microseconds())/1000, "ms-p99")
}
