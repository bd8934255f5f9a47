package runs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fly-dev/fly/store"
)

// touch makes empty files in dir.
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// Flutter's SDK on Windows: bin\flutter.bat is the command, found on the
// session's Path (whatever the case of its name) with PATHEXT, or in
// FLUTTER_ROOT's bin; bin\flutter (the Unix script) never is.
func TestFindFlutterWindows(t *testing.T) {
	sdk := t.TempDir()
	bin := filepath.Join(sdk, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	touch(t, bin, "flutter", "flutter.bat")
	both := t.TempDir()
	touch(t, both, "flutter.exe", "flutter.bat")
	script := t.TempDir()
	touch(t, script, "flutter", "flutter.js")
	empty := t.TempDir()
	e := &Engine{}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // "" for ErrNoFlutter
	}{
		{"Path", map[string]string{"Path": empty + ";" + bin}, filepath.Join(bin, "flutter.bat")},
		{"PATH", map[string]string{"PATH": bin}, filepath.Join(bin, "flutter.bat")},
		{"relative entries skipped", map[string]string{"Path": `bin;` + bin}, filepath.Join(bin, "flutter.bat")},
		{"PATHEXT order", map[string]string{"Path": both, "PATHEXT": ".COM;.EXE;.BAT"}, filepath.Join(both, "flutter.exe")},
		{"PATHEXT without .EXE", map[string]string{"Path": both, "PATHEXT": ".BAT;.CMD"}, filepath.Join(both, "flutter.bat")},
		{"no extension, nor one CreateProcess starts", map[string]string{"Path": script, "PATHEXT": ".JS;.EXE;.BAT"}, ""},
		{"FLUTTER_ROOT", map[string]string{"Path": empty, "Flutter_Root": sdk}, filepath.Join(bin, "flutter.bat")},
		{"nowhere", map[string]string{"Path": empty}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.findFlutter(tc.env)
			if tc.want == "" {
				if !errors.Is(err, ErrNoFlutter) {
					t.Errorf("findFlutter(%v) = %q, %v; want ErrNoFlutter", tc.env, got, err)
				}
				return
			}
			if err != nil || !strings.EqualFold(got, tc.want) {
				t.Errorf("findFlutter(%v) = %q, %v; want %q", tc.env, got, err, tc.want)
			}
		})
	}
}

// A batch file runs through cmd.exe, which Go does not quote for: an
// argument with a character cmd.exe reads as its own is refused, with the
// character named; so is one to flutter whatever its extension (a
// flutter.exe is a wrapper that may hand its command line to
// flutter.bat); the same argument to another program is not.
func TestCheckCommandLineWindows(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "flutter.bat", "tool.cmd", "prog.exe", "flutter.exe", "Flutter.COM")
	bat := filepath.Join(dir, "flutter.bat")
	shim := filepath.Join(dir, "flutter.exe")
	for _, tc := range []struct {
		exe     string
		arg     string
		refused bool
	}{
		{bat, "run", false},
		{bat, "--dart-define=GREETING=hello world", false},
		{bat, "--flavor=prod", false},
		{bat, `--target=lib\main_dev.dart`, false},
		{bat, "--dart-define=A=1&calc", true},
		{bat, "a|b", true},
		{bat, "<in", true},
		{bat, ">out", true},
		{bat, "x^y", true},
		{bat, "%PATH%", true},
		{bat, "!PATH!", true},
		{bat, `--dart-define=Q="&calc`, true},
		{bat, "line\r\nbreak", true},
		// ( and ) close or open a block of the batch file unless Go
		// quotes the argument, which it does for one with a space or tab.
		{bat, "--dart-define=A=x)", true},
		{bat, "(calc", true},
		{bat, `--dart-define-from-file=C:\Program Files (x86)\defs.json`, false},
		{bat, "--dart-define=TITLE=My App (dev)", false},
		{bat, "a\t(b)", false},
		{filepath.Join(dir, "tool.cmd"), "a&b", true},
		{filepath.Join(dir, "tool.cmd"), "a)b", true},
		{bat + " .", "a&b", true},                    // Windows drops the trailing dots and spaces
		{filepath.Join(dir, "flutter"), "a&b", true}, // resolved with PATHEXT
		// flutter.exe: a wrapper (shimgen, Scoop, a version manager) that
		// may run flutter.bat through cmd.exe with its own command line.
		{shim, "--dart-define=A=1&calc", true},
		{shim, `--dart-define=Q="`, true},
		{shim, "%USERPROFILE%", true},
		{shim, "x)", true},
		{shim, "--dart-define=TITLE=My App (dev)", false},
		{shim, "--dart-define=GREETING=hello world", false},
		{filepath.Join(dir, "Flutter.COM"), "a|b", true},
		{shim + ". ", "a^b", true},
		// Another program splits its own command line as Go quoted it.
		{filepath.Join(dir, "prog.exe"), "a&b %x% \" (", false},
	} {
		err := checkCommandLine(tc.exe, []string{"run", tc.arg})
		if (err != nil) != tc.refused {
			t.Errorf("checkCommandLine(%s, %q) = %v; want refused %v", filepath.Base(tc.exe), tc.arg, err, tc.refused)
		}
	}
}

// Start refuses such an argument before anything runs.
func TestStartRefusesUnsafeBatchArgument(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	touch(t, dir, "flutter.bat")
	_, err := e.Start(context.Background(), Spec{Kind: store.KindTool, Root: dir, Env: fakeEnv(),
		Command: filepath.Join(dir, "flutter.bat"), Args: []string{"run", "--dart-define=A=1&calc"}})
	if err == nil || !strings.Contains(err.Error(), "cmd.exe") || !strings.Contains(err.Error(), `"&"`) {
		t.Errorf("Start(flutter.bat with an & in an argument) = %v; want it refused, naming & and cmd.exe", err)
	}
	if recs, _ := e.List(dir); len(recs) != 0 {
		t.Errorf("a refused start left %d runs", len(recs))
	}
}

// A flutter.exe found first on the session's Path (PATHEXT lists .EXE
// before .BAT) is no way around the refusal: the run is refused before
// anything starts.
func TestStartRefusesUnsafeArgumentToFlutterExe(t *testing.T) {
	e := newEngine(t)
	e.cfg.Flutter = "" // found on the session's Path, as without --flutter
	root, bin := t.TempDir(), t.TempDir()
	touch(t, bin, "flutter.exe", "flutter.bat")
	env := fakeEnv()
	env["PATH"], env["PATHEXT"] = bin, ".COM;.EXE;.BAT;.CMD"
	_, err := e.Start(context.Background(), Spec{Kind: store.KindRun, Root: root, Env: env,
		Args: []string{"run", "--machine", "--dart-define=A=1&calc"}})
	if err == nil || !strings.Contains(err.Error(), "flutter.exe") || !strings.Contains(err.Error(), `"&"`) {
		t.Errorf("Start(flutter.exe with an & in an argument) = %v; want it refused, naming flutter.exe and &", err)
	}
	if recs, _ := e.List(root); len(recs) != 0 {
		t.Errorf("a refused start left %d runs", len(recs))
	}
}
