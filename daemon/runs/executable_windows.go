package runs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// What an executable is on Windows: a file whose extension is one of
// PATHEXT's, and whose command line is one string the child splits.
//
// Flutter's SDK has no flutter.exe: bin\flutter.bat is the command
// (bin\flutter, without an extension, is the shell script for Unix).
// Windows runs a batch file through cmd.exe, which reads the whole
// command line first: it expands %VAR% (and !VAR! where delayed
// expansion is on), splits commands at & and |, redirects at < and >,
// takes ^ as an escape, and counts " to know what is quoted. Go's os/exec
// quotes arguments for programs that split their command line as
// CommandLineToArgvW does (quotes around an argument with a space or a
// tab, \" for a quote), not for cmd.exe; its documentation says so
// (exec.Command: "Notable exceptions are msiexec.exe and cmd.exe (and
// thus, all batch files)"), and unlike Rust and others after the 2024
// reports of argument injection through batch files (BatBadBut,
// CVE-2024-24576), Go did not change it: Go 1.26's syscall.makeCmdLine
// has no case for a batch file (golang/go#27199; the proposal to quote
// for cmd.exe, golang/go#69939, is open). An argument such as
// `--dart-define=A=1&calc` would run calc. So checkCommandLine refuses,
// for a batch file, every argument holding a character cmd.exe would
// read as its own.
//
// And for flutter whatever its extension: Flutter's SDK has no
// flutter.exe, so a flutter.exe (or .com) found first on the Path is
// always someone's wrapper around flutter.bat: Chocolatey's shimgen,
// Scoop's shim, a version manager's. Such a wrapper hands its own
// command line on, as Go made it for a program, to cmd.exe running
// flutter.bat, which reads it as above. Whether one does cannot be told
// from outside, and flutter's arguments are an agent's to choose: so on
// Windows they are refused as a batch file's would be, whatever runs
// them. This check sees a program and its arguments, not who chose
// them, so flutter is told by its name (flutter.exe, flutter.com …): an
// upstream's command, named otherwise, has arguments from the user's own
// upstreams.json, refused only when that command is a batch file (where
// cmd.exe would garble them); a --flutter of another name is checked as
// what it is.
//
// ( and ) end or open a block of the batch file (an if or for whose body
// holds %* or %1) when cmd.exe reads them unquoted: Go quotes an
// argument only when it holds a space or a tab (or is empty), and cmd.exe
// reads what is inside quotes as text. So ( and ) are refused in an
// argument without a space or a tab, and allowed in one with them
// ("C:\Program Files (x86)\…").

// flutterFlagExample is --flutter's value in the hint of ErrNoFlutter.
const flutterFlagExample = `C:\path\to\flutter\bin\flutter.bat`

// envValue is the variable key of env: names are case-insensitive on
// Windows (its PATH is usually "Path"). An exact match wins.
func envValue(env map[string]string, key string) string {
	if v, ok := env[key]; ok {
		return v
	}
	for k, v := range env {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}

// startable are the extensions CreateProcess starts: PATHEXT may list
// more (.js, .py), which need a program of their own to run them.
var startable = []string{".com", ".exe", ".bat", ".cmd"}

// flutterIn returns dir's flutter with the first of env's PATHEXT
// extensions (Windows' default list without one) that names a file, as
// cmd.exe would find it: flutter.bat in Flutter's SDK.
func flutterIn(dir string, env map[string]string) (string, bool) {
	exts := envValue(env, "PATHEXT")
	if exts == "" {
		exts = ".COM;.EXE;.BAT;.CMD"
	}
	for ext := range strings.SplitSeq(strings.ToLower(exts), ";") {
		if ext == "" {
			continue
		}
		if ext[0] != '.' {
			ext = "." + ext
		}
		if !slices.Contains(startable, ext) {
			continue
		}
		p := filepath.Join(dir, "flutter"+ext)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

// batchUnsafe are the characters cmd.exe reads as its own in a command
// line that Go made (see above): quoting cannot protect %, nor ! under
// delayed expansion, and a " in an argument ends Go's quotes for cmd.exe;
// a line break ends the command.
const batchUnsafe = "\"%!&|<>^\r\n"

// blockChars open and close a block in a batch file: unsafe where Go
// does not quote the argument (see above).
const blockChars = "()"

// checkCommandLine refuses to run, with an argument that holds one of
// batchUnsafe (or an unquoted one of blockChars), a batch file (.bat,
// .cmd: what exe resolves to, as os/exec resolves it) or flutter whatever
// its extension (see above); and refuses a batch file whose path holds
// one of batchUnsafe.
func checkCommandLine(exe string, args []string) error {
	resolved, err := exec.LookPath(exe)
	if err != nil {
		resolved = exe // the start will say what is wrong with it
	}
	batch := isBatch(resolved)
	if !batch && !isFlutter(resolved) {
		return nil
	}
	if batch {
		for _, p := range []string{exe, resolved} {
			if i := strings.IndexAny(p, batchUnsafe); i >= 0 {
				return fmt.Errorf("%s is a batch file, which Windows runs through cmd.exe, and its path holds %q, which cmd.exe would read as part of a command: "+
					"move it to a path without any of %s, or start flyd with --flutter naming one", p, string(p[i]), shownPathUnsafe)
			}
		}
	}
	why := "is a batch file, which Windows runs through cmd.exe"
	if !batch {
		why = "may be a wrapper that runs flutter.bat through cmd.exe (Flutter's SDK has no " + filepath.Base(resolved) + ")"
	}
	for _, a := range args {
		if c, ok := unsafeIn(a); ok {
			return fmt.Errorf("argument %q holds %q: %s %s, and cmd.exe would read it as part of a command rather than as text; "+
				"on Windows its arguments may not hold any of %s (flutter takes such dart defines from a file: --dart-define-from-file)",
				a, c, filepath.Base(resolved), why, shownUnsafe)
		}
	}
	return nil
}

// unsafeIn returns the first character of a that cmd.exe would read as
// its own in the command line Go makes: one of batchUnsafe, or of
// blockChars where Go leaves a unquoted.
func unsafeIn(a string) (string, bool) {
	if i := strings.IndexAny(a, batchUnsafe); i >= 0 {
		return string(a[i]), true
	}
	if a != "" && !strings.ContainsAny(a, " \t") {
		if i := strings.IndexAny(a, blockChars); i >= 0 {
			return string(a[i]), true
		}
	}
	return "", false
}

// shownUnsafe and shownPathUnsafe are what checkCommandLine refuses in
// an argument and in a batch file's path, as an error shows them.
const (
	shownUnsafe     = `" % ! & | < > ^, line breaks, and ( ) in an argument without a space`
	shownPathUnsafe = `" % ! & | < > ^ and line breaks`
)

// isBatch reports whether Windows runs path through cmd.exe: its
// extension is .bat or .cmd, once the dots and spaces that Windows drops
// from the end of a file name are dropped (CVE-2024-43402: "x.bat ." is
// x.bat).
func isBatch(path string) bool {
	ext := strings.ToLower(filepath.Ext(strings.TrimRight(path, ". ")))
	return ext == ".bat" || ext == ".cmd"
}

// isFlutter reports whether path names flutter, whatever its extension
// (flutter.exe, flutter.com, flutter.bat), as flutterIn finds it.
func isFlutter(path string) bool {
	base := filepath.Base(strings.TrimRight(path, ". "))
	return strings.EqualFold(strings.TrimSuffix(base, filepath.Ext(base)), "flutter")
}
