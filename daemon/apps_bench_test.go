package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkDiscovery: 20 apps started outside fly, one after another, in
// a served workspace (the fake flutter run --machine with its DTD, as an
// IDE starts it): the time from each DTD file's write (its mtime) to the
// app in flyd's list (what runs_list returns). Reports p50 and p99 in ms.
func BenchmarkDiscovery(b *testing.B) {
	const apps = 20
	dartHome := b.TempDir()
	s, hc, root, flutter := benchFlyd(b, Config{DTDDir: filepath.Join(dartHome, "dtd")})
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
			file := filepath.Join(dartHome, "dtd", strconv.Itoa(cmd.Process.Pid))
			deadline := time.Now().Add(time.Minute)
			var written time.Time
			for {
				if fi, err := os.Stat(file); err == nil && written.IsZero() {
					written = fi.ModTime()
				}
				if !written.IsZero() && len(s.externalApps(root)) == i+1 {
					lat = append(lat, time.Since(written))
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("app %d was not found within a minute", i+1)
				}
				time.Sleep(200 * time.Microsecond) // a benchmark's poll, the measure's resolution
			}
		}
		for _, p := range procs {
			p.Process.Kill()
		}
	}
	b.ReportMetric(float64(p50(lat).Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(p99(lat).Microseconds())/1000, "ms-p99")
}
