package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/internal/wire"
	"github.com/fly-dev/fly/packaging"
)

// This file turns the templates in packaging/ into service units and reads
// installed units back, and does the same for Windows's "unit": the
// command line of a Run key value. Everything here is a pure function of
// its arguments (paths are this OS's), so systemd's and launchd's units
// are rendered and tested on Linux and macOS alike, and the Run key's on
// any OS.

// Names of the service. kardianos/service names the unit file after
// Config.Name, and launchd also uses it as the job's label.
const (
	systemdName  = "flyd"         // ~/.config/systemd/user/flyd.service
	launchdLabel = "dev.fly.flyd" // ~/Library/LaunchAgents/dev.fly.flyd.plist
	runValueName = "fly"          // HKCU\Software\Microsoft\Windows\CurrentVersion\Run, value "fly"
)

// packagedUnitFile is where a distro package installs flyd's systemd user
// unit for every user (fly's deb and rpm do: packaging/nfpm/flyd.service).
// flyctl service install enables it, rather than writing a unit of its
// own, when it runs the flyd install would run (see serviceCmd.target).
const packagedUnitFile = "/usr/lib/systemd/user/" + systemdName + ".service"

// runKeyPath is the Run key under HKEY_CURRENT_USER: Explorer runs the
// command line of each of its values when the user logs on.
const runKeyPath = `Software\Microsoft\Windows\CurrentVersion\Run`

// maxRunCommand is the longest command line, in UTF-16 code units, that
// Windows documents for a Run key value ("Run and RunOnce Registry Keys").
const maxRunCommand = 260

// bakedEnv lists, in order, the variables that install copies from the
// user's environment into the unit when they are set: PATH and the
// variables flutter reads, so that the service finds the same flutter as
// the user's shell, and fly's own overrides, so that flyd listens where
// flyctl and the shim look.
var bakedEnv = append(slices.Clone(wire.ToolchainEnv), paths.EnvSocket, paths.EnvStateDir)

// servicePlatform is where and how one OS's service manager keeps the unit.
type servicePlatform struct {
	goos     string
	manager  string   // "systemd", "launchd" or "Run key", for messages
	name     string   // kardianos Config.Name; the Run key value's name
	file     string   // the unit file, or the Run key value (HKCU\...\Run\fly)
	args     []string // flyd's arguments in the unit
	log      string   // launchd, Run key: the file flyd's output goes to
	logHint  string   // how to read flyd's log
	template string   // from packaging
	option   string   // the kardianos option that takes the unit text (for the Run key, its manager's)
	remove   string   // the command that removes the unit by hand
	// runKey: the unit is a value of HKCU's Run key (Windows), not a file.
	// It starts flyd at logon and does nothing more: no supervision, no
	// restart on failure, no environment of its own (see runKeyManager).
	runKey bool
	// packaged: file is the unit a distro package installed for every
	// user (packagedAt). install enables it and uninstall disables it;
	// flyctl writes and removes no file, and bakes in no environment.
	packaged bool
}

// packagedAt is p for the package's unit at file: the same systemd
// service, flyd.service, from the unit file that the user's manager
// finds when the user has none of their own in ~/.config/systemd/user.
func (p servicePlatform) packagedAt(file string) servicePlatform {
	p.file, p.packaged = file, true
	p.remove = "systemctl --user disable --now " + p.name + ".service"
	return p
}

// homeVar is the variable that names the user's home directory on goos:
// Windows sets no HOME, but USERPROFILE.
func homeVar(goos string) string {
	if goos == "windows" {
		return "USERPROFILE"
	}
	return "HOME"
}

// platformFor returns the service layout for goos and the user whose home
// is home: systemd on Linux, launchd on macOS, the Run key on Windows
// (which needs no home). The Run key platform's log is flyd.log in the
// state directory, which depends on the environment: the caller sets it.
func platformFor(goos, home string) (servicePlatform, error) {
	if goos == "windows" {
		return servicePlatform{
			goos:    goos,
			manager: "Run key",
			name:    runValueName,
			file:    `HKCU\` + runKeyPath + `\` + runValueName,
			args:    []string{"run", "--no-console"},
			option:  "RunCommand",
			remove:  `reg delete HKCU\` + runKeyPath + ` /v ` + runValueName + ` /f`,
			runKey:  true,
		}, nil
	}
	if goos != "linux" && goos != "darwin" {
		return servicePlatform{}, fmt.Errorf("flyctl service supports systemd on Linux, launchd on macOS and the Run key on Windows, not %s; run flyd in the foreground with: flyd run", goos)
	}
	if !filepath.IsAbs(home) {
		return servicePlatform{}, errors.New("cannot find your home directory: HOME is not set to an absolute path")
	}
	if goos == "darwin" {
		log := filepath.Join(home, "Library", "Logs", "fly", "flyd.log")
		file := filepath.Join(home, "Library", "LaunchAgents", launchdLabel+".plist")
		return servicePlatform{
			goos:     goos,
			manager:  "launchd",
			name:     launchdLabel,
			file:     file,
			args:     []string{"run"},
			log:      log,
			logHint:  log,
			template: packaging.LaunchdPlist,
			option:   "LaunchdConfig",
			remove:   "rm " + file,
		}, nil
	}
	file := filepath.Join(home, ".config", "systemd", "user", systemdName+".service")
	return servicePlatform{
		goos:     goos,
		manager:  "systemd",
		name:     systemdName,
		file:     file,
		args:     []string{"run"},
		logHint:  "journalctl --user -u " + systemdName,
		template: packaging.SystemdUnit,
		option:   "SystemdScript",
		remove:   "rm " + file,
	}, nil
}

// startArgv is the command that asks the service manager to start the
// installed service of user uid; nil for the Run key, which only starts
// flyd at logon.
func (p servicePlatform) startArgv(uid int) []string {
	if p.runKey {
		return nil
	}
	if p.manager == "launchd" {
		return []string{"launchctl", "kickstart", "gui/" + strconv.Itoa(uid) + "/" + p.name}
	}
	return []string{"systemctl", "--user", "start", p.name + ".service"}
}

// unitSpec is what install bakes into a unit.
type unitSpec struct {
	Flyd string    // absolute path of the flyd binary; the unit runs "Flyd run"
	Env  []unitEnv // the service's environment, in bakedEnv order (none for the Run key)
	Log  string    // launchd only: where flyd's stdout and stderr go
}

type unitEnv struct{ Name, Value string }

// bakeEnv returns the variables of bakedEnv that getenv has a value for.
func bakeEnv(getenv func(string) string) []unitEnv {
	var env []unitEnv
	for _, name := range bakedEnv {
		if v := getenv(name); v != "" {
			env = append(env, unitEnv{name, v})
		}
	}
	return env
}

// renderUnit fills in p's template with spec: the exact text install
// writes.
func renderUnit(p servicePlatform, spec unitSpec) (string, error) {
	if !filepath.IsAbs(spec.Flyd) {
		return "", fmt.Errorf("flyd path %q is not absolute", spec.Flyd)
	}
	if p.runKey {
		return runCommand(spec.Flyd, p.args)
	}
	values := []string{spec.Flyd, spec.Log}
	for _, e := range spec.Env {
		values = append(values, e.Name, e.Value)
	}
	for _, v := range values {
		if strings.ContainsAny(v, "\x00\r\n") {
			return "", fmt.Errorf("cannot write %q into a service unit: it holds a newline or NUL", v)
		}
	}
	if p.goos == "linux" && strings.ContainsAny(spec.Flyd, `"'\`) {
		return "", fmt.Errorf("systemd cannot run %s: its path holds a quote or backslash; move flyd elsewhere", spec.Flyd)
	}
	var env []string
	switch p.goos {
	case "darwin":
		for _, e := range spec.Env {
			env = append(env, "<key>"+xmlText(e.Name)+"</key>", "<string>"+xmlText(e.Value)+"</string>")
		}
		return fillTemplate(p.template, map[string]string{
			"FLYD": xmlText(spec.Flyd),
			"LOG":  xmlText(spec.Log),
		}, map[string][]string{"ENVIRONMENT": env})
	default:
		for _, e := range spec.Env {
			env = append(env, "Environment="+systemdQuote(e.Name+"="+e.Value))
		}
		return fillTemplate(p.template, map[string]string{
			"FLYD": systemdExecPath(spec.Flyd),
		}, map[string][]string{"ENVIRONMENT": env})
	}
}

var templatePlaceholder = regexp.MustCompile(`@[A-Z][A-Z_]*@`)

// fillTemplate replaces the placeholders of a packaging template. A line
// that holds only @NAME@ (and blanks) becomes the lines of blocks[NAME],
// each at that line's indentation, or nothing when there are none. Any
// other @NAME@ is replaced by vals[NAME]. Values are not scanned again. A
// placeholder with no value is an error, so a template and its caller
// cannot drift apart silently.
func fillTemplate(tmpl string, vals map[string]string, blocks map[string][]string) (string, error) {
	var b strings.Builder
	var missing []string
	for _, line := range strings.SplitAfter(tmpl, "\n") {
		body := strings.TrimRight(line, "\n")
		trimmed := strings.TrimSpace(body)
		if templatePlaceholder.MatchString(trimmed) && templatePlaceholder.FindString(trimmed) == trimmed {
			if block, ok := blocks[strings.Trim(trimmed, "@")]; ok {
				indent := body[:strings.Index(body, trimmed)]
				for _, l := range block {
					b.WriteString(indent + l + "\n")
				}
				continue
			}
		}
		b.WriteString(templatePlaceholder.ReplaceAllStringFunc(line, func(ph string) string {
			v, ok := vals[strings.Trim(ph, "@")]
			if !ok {
				missing = append(missing, ph)
				return ph
			}
			return v
		}))
	}
	if missing != nil {
		return "", fmt.Errorf("service template has placeholders with no value: %s", strings.Join(missing, ", "))
	}
	return b.String(), nil
}

// systemdExecPath quotes path as the binary of an ExecStart= line: % is
// doubled (it starts a specifier), and a path with blanks is
// double-quoted. systemd expands no $ in the binary's path, and refuses
// one holding quotes or backslashes whatever the quoting, so renderUnit
// rejects those.
func systemdExecPath(path string) string {
	path = strings.ReplaceAll(path, "%", "%%")
	if strings.ContainsAny(path, " \t") {
		return `"` + path + `"`
	}
	return path
}

// systemdQuote double-quotes s for an Environment= line, where % starts a
// specifier and \ and " are escapes.
func systemdQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(s) + `"`
}

// xmlText escapes s for a plist's character data.
func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}

// unitInfo is what status reads back from an installed unit.
type unitInfo struct {
	Flyd string            // the binary the service runs
	Args []string          // its arguments
	Env  map[string]string // its environment
}

// parseUnit reads a unit that install wrote, or that someone edited.
func parseUnit(p servicePlatform, data []byte) (unitInfo, error) {
	switch {
	case p.runKey:
		return parseRunCommand(string(data))
	case p.goos == "darwin":
		return parsePlist(data)
	}
	return parseSystemd(string(data))
}

// runCommand is the command line of a Run key value that runs flyd with
// args: the path in double quotes, so that Explorer runs it whatever
// blanks it holds (unquoted, "C:\Program Files\fly\flyd.exe" would run
// C:\Program.exe if there were one), and each argument quoted as the
// C runtime reads it back (windowsArg). A path that cannot be quoted so (a
// double quote, which Windows forbids in names anyway, or a control
// character), that holds a % (which could be read as an environment
// variable) or that makes the line longer than Windows allows a Run value
// is refused.
func runCommand(flyd string, args []string) (string, error) {
	if strings.ContainsFunc(flyd, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '"' || r == '%' }) {
		return "", fmt.Errorf("cannot start %s at logon: its path holds a double quote, %% or a control character; move flyd elsewhere", flyd)
	}
	words := []string{`"` + flyd + `"`}
	for _, a := range args {
		words = append(words, windowsArg(a))
	}
	line := strings.Join(words, " ")
	if n := len(utf16.Encode([]rune(line))); n > maxRunCommand {
		return "", fmt.Errorf("cannot start %s at logon: the command line would be %d characters, and a Run key value holds at most %d; move flyd to a shorter path", flyd, n, maxRunCommand)
	}
	return line, nil
}

// windowsArg quotes s as one argument of a Windows command line, as
// syscall.EscapeArg does: as it is when it needs no quotes, else in
// double quotes, with the backslashes before a quote (or before the
// closing one) doubled and each quote escaped.
func windowsArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"") {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	slashes := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			slashes++
		case '"':
			b.WriteString(strings.Repeat(`\`, slashes+1))
			slashes = 0
		default:
			slashes = 0
		}
		b.WriteByte(s[i])
	}
	b.WriteString(strings.Repeat(`\`, slashes))
	b.WriteByte('"')
	return b.String()
}

// parseRunCommand reads a Run key value's command line back: the program
// as Windows reads it (in double quotes, up to the next one, or up to the
// first blank), then its arguments as the C runtime splits them
// (splitWindowsArgs).
func parseRunCommand(line string) (unitInfo, error) {
	line = strings.TrimLeft(line, " \t")
	var prog, rest string
	if strings.HasPrefix(line, `"`) {
		end := strings.IndexByte(line[1:], '"')
		if end < 0 {
			return unitInfo{}, errors.New("unterminated \" quote around the program")
		}
		prog, rest = line[1:1+end], line[2+end:]
	} else {
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		prog, rest = line[:i], line[i:]
	}
	if prog == "" {
		return unitInfo{}, errors.New("no program in the command line")
	}
	return unitInfo{Flyd: prog, Args: splitWindowsArgs(rest), Env: map[string]string{}}, nil
}

// splitWindowsArgs splits the arguments of a command line as the
// Microsoft C runtime does: blanks separate words outside double quotes;
// 2n backslashes and a quote are n backslashes and the quote opens or
// closes; 2n+1 backslashes and a quote are n backslashes and a literal
// quote; "" inside quotes is a literal quote; other backslashes are
// literal.
func splitWindowsArgs(s string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			n := 0
			for i < len(s) && s[i] == '\\' {
				n++
				i++
			}
			if i < len(s) && s[i] == '"' {
				w.WriteString(strings.Repeat(`\`, n/2))
				if n%2 == 1 {
					w.WriteByte('"')
				} else {
					quoted = !quoted
				}
			} else {
				w.WriteString(strings.Repeat(`\`, n))
				i--
			}
			inWord = true
		case c == '"':
			if quoted && i+1 < len(s) && s[i+1] == '"' {
				w.WriteByte('"')
				i++
			} else {
				quoted = !quoted
			}
			inWord = true
		case (c == ' ' || c == '\t') && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// parseSystemd reads ExecStart= and Environment= from a unit's [Service]
// section, undoing systemd's quoting, escapes and specifier doubling.
func parseSystemd(text string) (unitInfo, error) {
	info := unitInfo{Env: map[string]string{}}
	text = strings.ReplaceAll(text, "\\\n", " ") // continuation lines
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			section = line
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section != "[Service]" {
			continue
		}
		switch strings.TrimSpace(key) {
		case "ExecStart":
			words, err := systemdWords(value)
			if err != nil {
				return unitInfo{}, fmt.Errorf("ExecStart=: %w", err)
			}
			if len(words) == 0 {
				continue
			}
			// Specifiers everywhere, variables in the arguments only.
			for i, w := range words {
				words[i] = strings.ReplaceAll(w, "%%", "%")
				if i > 0 {
					words[i] = strings.ReplaceAll(words[i], "$$", "$")
				}
			}
			info.Flyd = strings.TrimLeft(words[0], "-@+!:|")
			info.Args = words[1:]
		case "Environment":
			words, err := systemdWords(value)
			if err != nil {
				//lint:ignore ST1005 systemd's directive, as the unit spells it
				return unitInfo{}, fmt.Errorf("Environment=: %w", err)
			}
			for _, w := range words {
				if k, v, ok := strings.Cut(strings.ReplaceAll(w, "%%", "%"), "="); ok {
					info.Env[k] = v
				}
			}
		}
	}
	if info.Flyd == "" {
		return unitInfo{}, errors.New("no ExecStart= in [Service]")
	}
	return info, nil
}

// systemdWords splits s into words as systemd does for ExecStart= and
// Environment=: blanks separate words, "…" and '…' group them, and
// backslash escapes (\\ \" \' \n \t \s \xNN) are undone.
func systemdWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			switch e := s[i]; e {
			case 'n':
				w.WriteByte('\n')
			case 't':
				w.WriteByte('\t')
			case 's':
				w.WriteByte(' ')
			case 'x':
				if i+2 >= len(s) {
					return nil, errors.New(`short \x escape`)
				}
				b, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return nil, fmt.Errorf(`bad escape \x%s`, s[i+1:i+3])
				}
				w.WriteByte(byte(b))
				i += 2
			default:
				w.WriteByte(e)
			}
			inWord = true
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote = c
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// parsePlist reads ProgramArguments and EnvironmentVariables from a
// launchd property list.
func parsePlist(data []byte) (unitInfo, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if err != nil {
			if err == io.EOF {
				err = errors.New("no <dict> in the property list")
			}
			return unitInfo{}, err
		}
		start, ok := tok.(xml.StartElement)
		if !ok || start.Name.Local != "dict" {
			continue
		}
		v, err := plistValue(d, start)
		if err != nil {
			return unitInfo{}, err
		}
		top := v.(map[string]any)
		info := unitInfo{Env: map[string]string{}}
		args, _ := top["ProgramArguments"].([]any)
		for i, a := range args {
			s, _ := a.(string)
			if i == 0 {
				info.Flyd = s
			} else {
				info.Args = append(info.Args, s)
			}
		}
		if info.Flyd == "" {
			if s, ok := top["Program"].(string); ok {
				info.Flyd = s
			}
		}
		env, _ := top["EnvironmentVariables"].(map[string]any)
		for k, v := range env {
			if s, ok := v.(string); ok {
				info.Env[k] = s
			}
		}
		if info.Flyd == "" {
			return unitInfo{}, errors.New("no ProgramArguments in the property list")
		}
		return info, nil
	}
}

// plistValue decodes the plist element that start opened: a dict becomes
// map[string]any, an array []any, true and false bool, and anything else
// its text.
func plistValue(d *xml.Decoder, start xml.StartElement) (any, error) {
	switch start.Name.Local {
	case "dict":
		m := map[string]any{}
		key := ""
		for {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			switch t := tok.(type) {
			case xml.EndElement:
				return m, nil
			case xml.StartElement:
				v, err := plistValue(d, t)
				if err != nil {
					return nil, err
				}
				if t.Name.Local == "key" {
					key, _ = v.(string)
				} else {
					m[key] = v
				}
			}
		}
	case "array":
		var a []any
		for {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			switch t := tok.(type) {
			case xml.EndElement:
				return a, nil
			case xml.StartElement:
				v, err := plistValue(d, t)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
		}
	case "true", "false":
		return start.Name.Local == "true", d.Skip()
	default:
		var b strings.Builder
		for depth := 1; depth > 0; {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			switch t := tok.(type) {
			case xml.StartElement:
				depth++
			case xml.EndElement:
				depth--
			case xml.CharData:
				b.Write(t)
			}
		}
		return b.String(), nil
	}
}
