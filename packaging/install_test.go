package packaging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// rivalFlyctl stands for fly.io's CLI: another program named flyctl. It
// leaves a mark if anything runs it.
const rivalFlyctl = `#!/bin/sh
echo ran >> "$(dirname "$0")/ran"
echo "flyctl v0.3.210 linux/amd64 Commit: 0123abcd BuildDate: 2025-11-01T00:00:00Z"
`

// installEnv is what install.sh runs with in these tests: a scratch HOME,
// the release served from base, and a PATH of path's directories and then
// those of the tools the script uses (none of which holds a flyctl).
type installEnv struct {
	t          *testing.T
	sh, home   string
	base       string
	path       []string
	installDir string // FLY_INSTALL_DIR, or "" for the default
	force      string
}

func (e installEnv) run() (string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.sh, "install.sh")
	env := []string{
		"HOME=" + e.home,
		"PATH=" + strings.Join(append(e.path, toolDirs(e.t)...), string(os.PathListSeparator)),
		"FLY_INSTALL_BASE_URL=" + e.base,
		"TMPDIR=" + e.t.TempDir(),
		"LC_ALL=C",
	}
	if e.installDir != "" {
		env = append(env, "FLY_INSTALL_DIR="+e.installDir)
	}
	if e.force != "" {
		env = append(env, "FLY_INSTALL_FORCE="+e.force)
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// toolDirs are the directories of the programs install.sh runs, for its
// PATH; the test is skipped where one of them holds a flyctl, which would
// take part in the test.
func toolDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	seen := map[string]bool{}
	for _, tool := range []string{"sh", "curl", "uname", "id", "mktemp", "awk", "sed", "grep", "tar", "gzip", "cut", "cp", "mv", "rm", "chmod", "mkdir", "head", "dirname", "sha256sum", "shasum", "sysctl"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		d := filepath.Dir(p)
		if seen[d] {
			continue
		}
		seen[d] = true
		if _, err := os.Stat(filepath.Join(d, "flyctl")); err == nil {
			t.Skipf("%s holds a flyctl, which would take part in the test", d)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestInstallScript runs install.sh against the snapshot in dist/ (made by
// "packaging/release snapshot"), served over HTTP, into a scratch HOME with
// fly.io's flyctl on PATH: the binaries land and run, a damaged archive is
// refused, the other flyctl is reported and left alone, a file that is not
// fly's is not replaced unless forced, and a second run changes nothing.
func TestInstallScript(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skipf("install.sh is for Linux and macOS, not %s", runtime.GOOS)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run install.sh with")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		if _, err := exec.LookPath("wget"); err != nil {
			t.Skip("neither curl nor wget is installed, which install.sh downloads with")
		}
	}
	dist := distDir(t)
	archive := "fly_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	if _, err := os.Stat(filepath.Join(dist, archive)); err != nil {
		t.Skipf("the snapshot in %s has no %s for this machine", dist, archive)
	}
	var meta struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(dist, "metadata.json")); err != nil || json.Unmarshal(b, &meta) != nil {
		t.Fatalf("dist/metadata.json: %v", err)
	}

	srv := httptest.NewServer(http.FileServer(http.Dir(dist)))
	defer srv.Close()
	// The same release with the archive damaged in transit: checksums.txt
	// is the real one.
	damaged := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimPrefix(r.URL.Path, "/") != archive {
			http.FileServer(http.Dir(dist)).ServeHTTP(w, r)
			return
		}
		b, err := os.ReadFile(filepath.Join(dist, archive))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		b[len(b)/2] ^= 0xff
		w.Write(b)
	}))
	defer damaged.Close()

	home := t.TempDir()
	rivalDir := filepath.Join(home, ".fly", "bin")
	if err := os.MkdirAll(rivalDir, 0o755); err != nil {
		t.Fatal(err)
	}
	rival := filepath.Join(rivalDir, "flyctl")
	if err := os.WriteFile(rival, []byte(rivalFlyctl), 0o755); err != nil {
		t.Fatal(err)
	}
	rivalSum := fileSum(t, rival)
	bin := filepath.Join(home, ".local", "bin")
	env := installEnv{t: t, sh: sh, home: home, base: srv.URL, path: []string{rivalDir}}

	// checkRival: the other flyctl is as it was, and was never run.
	checkRival := func(step string) {
		t.Helper()
		if got := fileSum(t, rival); got != rivalSum {
			t.Errorf("%s: the other flyctl changed", step)
		}
		if _, err := os.Stat(filepath.Join(rivalDir, "ran")); err == nil {
			t.Errorf("%s: install.sh ran the other flyctl", step)
		}
	}
	// A base URL that is neither https nor this machine is refused before
	// anything is downloaded: the checksums come from the same place.
	plain := env
	for _, base := range []string{"http://example.invalid/releases", "http://localhost:1@example.invalid/releases", "http://127.0.0.1.example.invalid/releases"} {
		plain.base = base
		if out, err := plain.run(); err == nil || !strings.Contains(out, "must be https://") {
			t.Errorf("install.sh from %s = %v:\n%s\nwant a refusal", base, err, out)
		}
	}

	// checkInstalled: flyd and flyctl are in bin, are the snapshot's and
	// run; their sums are returned.
	checkInstalled := func(step string) (sums [2]string) {
		t.Helper()
		for i, name := range []string{"flyd", "flyctl"} {
			p := filepath.Join(bin, name)
			st, err := os.Stat(p)
			if err != nil || st.Mode().Perm()&0o111 == 0 {
				t.Fatalf("%s: %s is not an executable: %v", step, p, err)
			}
			sums[i] = fileSum(t, p)
		}
		out, err := exec.Command(filepath.Join(bin, "flyctl"), "version", "--json").Output()
		var v struct{ Product, Version string }
		if err != nil || json.Unmarshal(out, &v) != nil || v.Product != "fly" || v.Version != meta.Version {
			t.Errorf("%s: installed flyctl version --json = %q, %v; want product fly, version %s", step, out, err, meta.Version)
		}
		out, err = exec.Command(filepath.Join(bin, "flyd"), "version").Output()
		if err != nil || !strings.HasPrefix(string(out), "flyd "+meta.Version+" (") {
			t.Errorf("%s: installed flyd version = %q, %v; want flyd %s (...)", step, out, err, meta.Version)
		}
		return sums
	}
	wantLines := func(step, out string, lines ...string) {
		t.Helper()
		for _, l := range lines {
			if !strings.Contains(out, l) {
				t.Errorf("%s: install.sh did not say %q:\n%s", step, l, out)
			}
		}
	}

	// A damaged download installs nothing.
	bad := env
	bad.base = damaged.URL
	out, err := bad.run()
	if err == nil {
		t.Errorf("damaged archive: install.sh succeeded, want a refusal:\n%s", out)
	}
	wantLines("damaged archive", out, "SHA-256", "Nothing was installed")
	if _, err := os.Stat(filepath.Join(bin, "flyctl")); err == nil {
		t.Error("damaged archive: flyctl was installed anyway")
	}
	checkRival("damaged archive")

	// First install: ~/.local/bin is not on PATH, the other flyctl is.
	out, err = env.run()
	if err != nil {
		t.Fatalf("install.sh = %v\n%s", err, out)
	}
	first := checkInstalled("install")
	wantLines("install", out,
		"installed flyctl "+meta.Version,
		bin+" is not on your PATH",
		`export PATH="`+bin+`:$PATH"`,
		"another program named flyctl is on your PATH: "+rival,
		"'flyctl' runs that one",
		"run fly's as "+bin+"/flyctl",
		bin+"/flyctl setup",
	)
	checkRival("install")

	// Again: the same files, the same report.
	out2, err := env.run()
	if err != nil {
		t.Fatalf("install.sh again = %v\n%s", err, out2)
	}
	if again := checkInstalled("again"); again != first {
		t.Errorf("a second install.sh changed the binaries: %v, then %v", first, again)
	}
	if entries, _ := os.ReadDir(bin); len(entries) != 2 {
		t.Errorf("%s holds %d files after two installs, want flyd and flyctl", bin, len(entries))
	}
	if out2 != out {
		t.Errorf("a second install.sh said something else:\n%s\nthen\n%s", out, out2)
	}
	checkRival("again")

	// With ~/.local/bin first on PATH, fly's flyctl wins, and it says so.
	ahead := env
	ahead.path = []string{bin, rivalDir}
	out, err = ahead.run()
	if err != nil {
		t.Fatalf("install.sh with %s first on PATH = %v\n%s", bin, err, out)
	}
	wantLines("first on PATH", out, "'flyctl' runs fly's", "run the other as "+rival, "  flyctl setup")
	if strings.Contains(out, "is not on your PATH") {
		t.Errorf("first on PATH: install.sh says %s is not on PATH:\n%s", bin, out)
	}
	checkRival("first on PATH")

	// Into the other flyctl's directory: refused, unless forced.
	into := env
	into.installDir = rivalDir
	out, err = into.run()
	if err == nil {
		t.Errorf("install over the other flyctl: install.sh succeeded, want a refusal:\n%s", out)
	}
	wantLines("install over the other flyctl", out, rival+" is not fly's flyctl", "FLY_INSTALL_FORCE=1")
	if _, err := os.Stat(filepath.Join(rivalDir, "flyd")); err == nil {
		t.Error("install over the other flyctl: flyd was installed anyway")
	}
	checkRival("install over the other flyctl")
	into.force = "1"
	out, err = into.run()
	if err != nil {
		t.Fatalf("FLY_INSTALL_FORCE=1 install.sh = %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(rival); bytes.Equal(got, []byte(rivalFlyctl)) {
		t.Errorf("FLY_INSTALL_FORCE=1: %s was not replaced:\n%s", rival, out)
	}
}
