package packaging

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// distDir is the snapshot to check: $FLY_DIST (.ci/release-snapshot sets
// it), else the repository's dist/ once "packaging/release snapshot" has
// finished writing it; or the test is skipped.
func distDir(t *testing.T) string {
	t.Helper()
	dist := os.Getenv("FLY_DIST")
	if dist == "" {
		dist = filepath.Join("..", "dist")
	}
	dist, err := filepath.Abs(dist)
	if err != nil {
		t.Fatal(err)
	}
	// packaging/release copies these in last.
	for _, f := range []string{"checksums.txt", "metadata.json", "fly.mcpb", "install.sh"} {
		if _, err := os.Stat(filepath.Join(dist, f)); err != nil {
			t.Skipf("%s holds no finished snapshot (no %s): run packaging/release snapshot first", dist, f)
		}
	}
	t.Logf("checking the snapshot in %s", dist)
	return dist
}

// TestDistChecksums: checksums.txt lists every file of the release, each
// with its SHA-256; install.sh trusts it.
func TestDistChecksums(t *testing.T) {
	dist := distDir(t)
	f, err := os.Open(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("checksums.txt: line %q is not SUM  NAME", sc.Text())
		}
		listed[name] = true
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Errorf("checksums.txt lists %s: %v", name, err)
			continue
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("checksums.txt: %s is %x, listed as %s", name, got, sum)
		}
	}
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || n == "checksums.txt" || n == "artifacts.json" || n == "metadata.json" || n == "config.yaml" {
			continue
		}
		if !listed[n] {
			t.Errorf("dist/%s is not in checksums.txt", n)
		}
	}
	for _, want := range []string{"install.sh", "install.ps1", "fly.mcpb", "server.json", "fly_linux_amd64.tar.gz.sbom.json"} {
		if !listed[want] {
			t.Errorf("checksums.txt does not list %s", want)
		}
	}
}

// TestDistArchives: an archive per OS and architecture (zip for Windows),
// and a macOS universal one, each holding flyd, flyctl, README.md and
// LICENSE, the binaries executable.
func TestDistArchives(t *testing.T) {
	dist := distDir(t)
	for _, goos := range []string{"linux", "darwin", "windows"} {
		arches := []string{"amd64", "arm64"}
		if goos == "darwin" {
			arches = append(arches, "universal")
		}
		for _, arch := range arches {
			exe := ""
			if goos == "windows" {
				exe = ".exe"
			}
			want := []string{"LICENSE", "README.md", "flyctl" + exe, "flyd" + exe}
			name := fmt.Sprintf("fly_%s_%s.tar.gz", goos, arch)
			var got []string
			if goos == "windows" {
				name = fmt.Sprintf("fly_%s_%s.zip", goos, arch)
				z, err := zip.OpenReader(filepath.Join(dist, name))
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				for _, f := range z.File {
					got = append(got, f.Name)
				}
				z.Close()
			} else {
				for _, h := range tarEntries(t, filepath.Join(dist, name)) {
					got = append(got, h.Name)
					if !strings.HasSuffix(h.Name, ".md") && h.Name != "LICENSE" && h.Mode&0o111 != 0o111 {
						t.Errorf("%s: %s has mode %o, want it executable", name, h.Name, h.Mode)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s holds %q, want %q", name, got, want)
			}
		}
	}
}

// tarEntries lists a .tar.gz's entries.
func tarEntries(t *testing.T, path string) []*tar.Header {
	t.Helper()
	var hs []*tar.Header
	walkTar(t, path, func(h *tar.Header, _ io.Reader) { hs = append(hs, h) })
	return hs
}

func walkTar(t *testing.T, path string, f func(*tar.Header, io.Reader)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	walkTarGz(t, path, b, f)
}

func walkTarGz(t *testing.T, name string, b []byte, f func(*tar.Header, io.Reader)) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f(h, tr)
	}
}

// arMembers reads a .deb (an ar archive) into its members.
func arMembers(t *testing.T, path string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("!<arch>\n")) {
		t.Fatalf("%s is not an ar archive", path)
	}
	m := map[string][]byte{}
	for b = b[8:]; len(b) >= 60; {
		name := strings.TrimSuffix(strings.TrimSpace(string(b[:16])), "/")
		var size int
		if _, err := fmt.Sscan(strings.TrimSpace(string(b[48:58])), &size); err != nil || 60+size > len(b) {
			t.Fatalf("%s: bad ar header for %s", path, name)
		}
		m[name] = b[60 : 60+size]
		b = b[60+size+size%2:]
	}
	return m
}

// TestDistDeb: the deb is fly-flutter, installs both binaries to /usr/bin
// and the user unit to /usr/lib/systemd/user, nothing in /etc, and runs
// the maintainer scripts in nfpm/.
func TestDistDeb(t *testing.T) {
	dist := distDir(t)
	debs, _ := filepath.Glob(filepath.Join(dist, "fly-flutter_*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("dist/ holds %d fly-flutter_*_amd64.deb, want 1", len(debs))
	}
	m := arMembers(t, debs[0])
	unit, err := os.ReadFile("nfpm/flyd.service")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	walkTarGz(t, "data.tar.gz", m["data.tar.gz"], func(h *tar.Header, r io.Reader) {
		name := strings.TrimPrefix(h.Name, ".")
		files[name] = h
		if name == "/usr/lib/systemd/user/flyd.service" {
			if b, _ := io.ReadAll(r); !bytes.Equal(b, unit) {
				t.Errorf("the deb's %s is not nfpm/flyd.service:\n%s", name, b)
			}
		}
		if strings.HasPrefix(name, "/etc") {
			t.Errorf("the deb installs %s: nothing goes in /etc", name)
		}
	})
	for name, mode := range map[string]int64{"/usr/bin/flyd": 0o755, "/usr/bin/flyctl": 0o755, "/usr/lib/systemd/user/flyd.service": 0o644} {
		if h := files[name]; h == nil || h.Mode&0o777 != mode {
			t.Errorf("the deb's %s = %v, want a file of mode %o", name, h, mode)
		}
	}
	control := map[string][]byte{}
	walkTarGz(t, "control.tar.gz", m["control.tar.gz"], func(h *tar.Header, r io.Reader) {
		control[strings.TrimPrefix(h.Name, "./")], _ = io.ReadAll(r)
	})
	if !bytes.Contains(control["control"], []byte("\nPackage: fly-flutter\n")) && !bytes.HasPrefix(control["control"], []byte("Package: fly-flutter\n")) {
		t.Errorf("the deb's control names another package:\n%s", control["control"])
	}
	for member, script := range map[string]string{"postinst": "postinstall.sh", "prerm": "preremove.sh", "postrm": "postremove.sh"} {
		want, _ := os.ReadFile(filepath.Join("nfpm", script))
		if !bytes.Equal(control[member], want) {
			t.Errorf("the deb's %s is not nfpm/%s (is the snapshot older than it? run packaging/release snapshot)", member, script)
		}
	}
}

// TestDistRPM: the same of the rpm, read with rpm where it is installed.
func TestDistRPM(t *testing.T) {
	dist := distDir(t)
	rpmTool, err := exec.LookPath("rpm")
	if err != nil {
		t.Skip("rpm is not installed (apt-get install rpm): the rpm is not checked")
	}
	rpms, _ := filepath.Glob(filepath.Join(dist, "fly-flutter-*.x86_64.rpm"))
	if len(rpms) != 1 {
		t.Fatalf("dist/ holds %d fly-flutter-*.x86_64.rpm, want 1", len(rpms))
	}
	out, err := exec.Command(rpmTool, "-qp", "--qf", "%{NAME}\n", rpms[0]).Output()
	if err != nil || string(out) != "fly-flutter\n" {
		t.Errorf("rpm -qp --qf %%{NAME} = %q, %v; want fly-flutter", out, err)
	}
	out, err = exec.Command(rpmTool, "-qlp", rpms[0]).Output()
	if err != nil {
		t.Fatalf("rpm -qlp: %v", err)
	}
	for _, f := range []string{"/usr/bin/flyd", "/usr/bin/flyctl", "/usr/lib/systemd/user/flyd.service"} {
		if !slices.Contains(strings.Split(string(out), "\n"), f) {
			t.Errorf("the rpm has no %s:\n%s", f, out)
		}
	}
	out, err = exec.Command(rpmTool, "-qp", "--scripts", rpms[0]).Output()
	if err != nil {
		t.Fatalf("rpm -qp --scripts: %v", err)
	}
	for _, s := range []string{"postinstall.sh", "preremove.sh", "postremove.sh"} {
		want, _ := os.ReadFile(filepath.Join("nfpm", s))
		if !bytes.Contains(out, bytes.TrimSpace(want)) {
			t.Errorf("the rpm's scriptlets do not hold nfpm/%s:\n%s", s, out)
		}
	}
}

// TestDistManagers: the Homebrew cask, Scoop manifest and winget manifests
// are fly-flutter's, installing flyd and flyctl, and name no fly or flyctl
// package.
func TestDistManagers(t *testing.T) {
	dist := distDir(t)
	cask, err := os.ReadFile(filepath.Join(dist, "homebrew", "Casks", "fly-flutter.rb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`cask "fly-flutter" do`, `binary "flyd"`, `binary "flyctl"`, "https://github.com/fly-dev/fly/releases/download/"} {
		if !bytes.Contains(cask, []byte(want)) {
			t.Errorf("the cask has no %q:\n%s", want, cask)
		}
	}
	var scoop struct {
		Architecture map[string]struct {
			URL string
			Bin []string
		}
	}
	b, err := os.ReadFile(filepath.Join(dist, "scoop", "fly-flutter.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &scoop); err != nil {
		t.Fatalf("scoop/fly-flutter.json: %v", err)
	}
	for _, arch := range []string{"64bit", "arm64"} {
		a := scoop.Architecture[arch]
		if !slices.Equal(a.Bin, []string{"flyd.exe", "flyctl.exe"}) || !strings.HasPrefix(a.URL, "https://github.com/fly-dev/fly/releases/download/") {
			t.Errorf("the Scoop manifest's %s = %+v, want flyd.exe and flyctl.exe from fly-dev/fly's release", arch, a)
		}
	}
	winget, _ := filepath.Glob(filepath.Join(dist, "winget", "manifests", "f", "fly-dev", "fly-flutter", "*", "fly-dev.fly-flutter.installer.yaml"))
	if len(winget) != 1 {
		t.Fatalf("dist/winget holds %d installer manifests of fly-dev.fly-flutter, want 1", len(winget))
	}
	b, _ = os.ReadFile(winget[0])
	for _, want := range []string{"PackageIdentifier: fly-dev.fly-flutter", "PortableCommandAlias: flyctl", "PortableCommandAlias: flyd", "Architecture: x64", "Architecture: arm64"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the winget installer manifest has no %q:\n%s", want, b)
		}
	}
}
