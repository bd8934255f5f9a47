package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/fly-dev/fly/internal/paths"
	"github.com/fly-dev/fly/packaging"
)

// This file turns the templates in packaging/ into service units and reads
// installed units back. Everything here is a pure function of its
// arguments, so both platforms' units are rendered and tested on any OS.

// Names of the service. kardianos/service names the unit file after
// Config.Name, and launchd also uses it as the job's label.
const (
	systemdName  = "flyd"         // ~/.config/systemd/user/flyd.service
	launchdLabel = "dev.fly.flyd" // ~/Library/LaunchAgents/dev.fly.flyd.plist
)

// bakedEnv lists, in order, the variables that install copies from the
// user's environment into the unit when they are set: PATH and the
// variables flutter reads, so that the service finds the same flutter as
// the user's shell, and fly's own overrides, so that flyd listens where
// flyctl and the shim look.
var bakedEnv = []string{
	"PATH", "FLUTTER_ROOT", "ANDROID_HOME", "ANDROID_SDK_ROOT", "JAVA_HOME", "PUB_CACHE",
	paths.EnvSocket, paths.EnvStateDir,
}

// servicePlatform is where and how one OS's service manager keeps the unit.
type servicePlatform struct {
	goos     string
	manager  string // "systemd" or "launchd", for messages
	name     string // kardianos Config.Name
	file     string // the unit file
	log      string // launchd: the file flyd's output goes to
	logHint  string // how to read flyd's log
	template string // from packaging
	option   string // the kardianos option that takes the unit text
}

// platformFor returns the service layout for goos and the user whose home
// is home. Only Linux (systemd) and macOS (launchd) have one.
func platformFor(goos, home string) (servicePlatform, error) {
	if goos != "linux" && goos != "darwin" {
		return servicePlatform{}, fmt.Errorf("flyctl service supports systemd on Linux and launchd on macOS, not %s; run flyd in the foreground with: flyd run", goos)
	}
	if !filepath.IsAbs(home) {
		return servicePlatform{}, errors.New("cannot find your home directory: HOME is not set to an absolute path")
	}
	if goos == "darwin" {
		log := filepath.Join(home, "Library", "Logs", "fly", "flyd.log")
		return servicePlatform{
			goos:     goos,
			manager:  "launchd",
			name:     launchdLabel,
			file:     filepath.Join(home, "Library", "LaunchAgents", launchdLabel+".plist"),
			log:      log,
			logHint:  log,
			template: packaging.LaunchdPlist,
			option:   "LaunchdConfig",
		}, nil
	}
	return servicePlatform{
		goos:     goos,
		manager:  "systemd",
		name:     systemdName,
		file:     filepath.Join(home, ".config", "systemd", "user", systemdName+".service"),
		logHint:  "journalctl --user -u " + systemdName,
		template: packaging.SystemdUnit,
		option:   "SystemdScript",
	}, nil
}

// startArgv is the command that asks the service manager to start the
// installed service of user uid.
func (p servicePlatform) startArgv(uid int) []string {
	if p.manager == "launchd" {
		return []string{"launchctl", "kickstart", "gui/" + strconv.Itoa(uid) + "/" + p.name}
	}
	return []string{"systemctl", "--user", "start", p.name + ".service"}
}

// unitSpec is what install bakes into a unit.
type unitSpec struct {
	Flyd string    // absolute path of the flyd binary; the unit runs "Flyd run"
	Env  []unitEnv // the service's environment, in bakedEnv order
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
	values := []string{spec.Flyd, spec.Log}
	for _, e := range spec.Env {
		values = append(values, e.Name, e.Value)
	}
	for _, v := range values {
		if strings.ContainsAny(v, "\x00\r\n") {
			return "", fmt.Errorf("cannot write %q into a service unit: it holds a newline or NUL", v)
		}
	}
	if p.goos != "darwin" && strings.ContainsAny(spec.Flyd, `"'\`) {
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
	if p.goos == "darwin" {
		return parsePlist(data)
	}
	return parseSystemd(string(data))
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
