package apperrors

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/fly-dev/fly/internal/fileuri"
	"github.com/fly-dev/fly/internal/jsonscan"
)

// Error is one framework error as the app reported it.
type Error struct {
	Library  string // "rendering library", "widgets library", "gesture", …; "" when unknown
	Summary  string // the one-line headline (the ErrorSummary)
	Widget   string // the error-causing widget, "Row"
	Location string // where it was created, relative to the project: "lib/home.dart:30:12"
	Frame    string // the first stack frame inside the project: "lib/main.dart:311:28"
	Text     string // the whole text, as flutter renders it
	// Repeat is set for "Another exception was thrown: <Summary>": the
	// framework's short form of an error seen before in this generation,
	// which carries nothing but the summary.
	Repeat bool
}

// Project says which paths are the project's: its root directory and its
// package name, so that file:///root/lib/x.dart and package:name/x.dart
// both become lib/x.dart.
type Project struct {
	Root    string
	Package string
}

// Bounds of what is kept of one error.
const (
	maxSummary = 512
	maxText    = 8 << 10
	maxField   = 256
)

const anotherPrefix = "Another exception was thrown: "

// maxNodes bounds the properties, children and frames of an error's
// DiagnosticsNode read, however many the app sent: the ones fly reads
// come first.
const maxNodes = 256

// node is the part of a DiagnosticsNode the parser reads: its lists stay
// raw until one is needed.
type node struct {
	Description string
	Type        string
	Name        string
	Properties  []byte // raw
	Children    []byte // raw
}

// ParseEvent parses the extensionData of a Flutter.Error event. It finds
// the nodes it reads without decoding the others (at most maxNodes of
// each list), so that an app's wide or deep tree costs a pass over its
// bytes and no more.
func ParseEvent(data json.RawMessage, p Project) (Error, error) {
	var description, rendered string
	var props []node
	var err error
	ok := jsonscan.Members(data, func(key, value []byte) bool {
		switch string(key) {
		case `"description"`:
			err = json.Unmarshal(value, &description)
		case `"renderedErrorText"`:
			err = json.Unmarshal(value, &rendered)
		case `"properties"`:
			props = nodes(value, maxNodes)
		}
		return err == nil
	})
	if err != nil {
		return Error{}, err
	}
	if !ok {
		return Error{}, errors.New("flutter error: not a JSON object")
	}
	e := Error{Library: bound(strings.TrimPrefix(description, "Exception caught by "), maxField), Text: bound(rendered, maxText)}
	if !strings.HasPrefix(description, "Exception caught by ") {
		e.Library = ""
	}
	for _, n := range props {
		switch {
		case n.Type == "ErrorSummary" && e.Summary == "":
			e.Summary = bound(n.Description, maxSummary)
		case n.Type == "DiagnosticsBlock" && n.Name == "The relevant error-causing widget was" && e.Widget == "":
			if c := nodes(n.Children, 1); len(c) > 0 {
				e.Widget, e.Location = widgetLocation(c[0].Description, p)
			}
		case n.Type == "DiagnosticsStackTrace" && e.Frame == "":
			for _, f := range nodes(n.Properties, maxNodes) {
				if e.Frame = projectFrame(f.Description, p); e.Frame != "" {
					break
				}
			}
		}
	}
	if s, ok := strings.CutPrefix(rendered, anotherPrefix); ok {
		e.Repeat, e.Summary = true, bound(s, maxSummary)
	}
	if e.Summary == "" {
		return Error{}, errors.New("flutter error without a summary")
	}
	return e, nil
}

// nodes decodes the first n nodes of the JSON array raw, each without
// its own lists (they stay sub-slices of raw); nil if raw is not an
// array.
func nodes(raw []byte, n int) []node {
	var out []node
	for _, el := range jsonscan.Elements(raw, n) {
		var nd node
		jsonscan.Members(el, func(key, value []byte) bool {
			switch string(key) {
			case `"description"`:
				_ = json.Unmarshal(value, &nd.Description)
			case `"type"`:
				_ = json.Unmarshal(value, &nd.Type)
			case `"name"`:
				_ = json.Unmarshal(value, &nd.Name)
			case `"properties"`:
				nd.Properties = value
			case `"children"`:
				nd.Children = value
			}
			return true
		})
		out = append(out, nd)
	}
	return out
}

// widgetRE reads the description of the error-causing widget:
// "Row Row:file:///…/lib/home.dart:30:12" (widget, then name:file:line:column).
var widgetRE = regexp.MustCompile(`^(\S+) (?:\S+:)?(file://\S+?|package:\S+?):(\d+):(\d+)$`)

func widgetLocation(desc string, p Project) (widget, loc string) {
	m := widgetRE.FindStringSubmatch(strings.TrimSpace(desc))
	if m == nil {
		return "", ""
	}
	rel := projectPath(m[2], p)
	if rel == "" {
		return bound(m[1], maxField), ""
	}
	return bound(m[1], maxField), rel + ":" + m[3] + ":" + m[4]
}

// frameRE reads a stack frame: "#0      Foo.bar (package:app/main.dart:311:28)".
var frameRE = regexp.MustCompile(`\((file://\S+?|package:\S+?):(\d+)(?::(\d+))?\)\s*$`)

// projectFrame is the location of a frame inside the project, or "".
func projectFrame(frame string, p Project) string {
	m := frameRE.FindStringSubmatch(frame)
	if m == nil {
		return ""
	}
	rel := projectPath(m[1], p)
	if rel == "" {
		return ""
	}
	loc := rel + ":" + m[2]
	if m[3] != "" {
		loc += ":" + m[3]
	}
	return loc
}

// projectPath maps a file:// URI under the root, or a package: URI of the
// project's package, to a path relative to the root ("lib/x.dart"); ""
// for anything else.
func projectPath(uri string, p Project) string {
	if rest, ok := strings.CutPrefix(uri, "package:"); ok {
		pkg, path, ok := strings.Cut(rest, "/")
		if !ok || pkg != p.Package || p.Package == "" || strings.Contains(path, "..") {
			return ""
		}
		return "lib/" + path
	}
	path, ok := fileuri.ToPath(uri)
	if !ok || p.Root == "" {
		return ""
	}
	rel, err := filepath.Rel(filepath.Clean(p.Root), path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	return bound(filepath.ToSlash(rel), maxField)
}

// headerRE is the first line of a rendered error:
// "══╡ EXCEPTION CAUGHT BY RENDERING LIBRARY ╞═══…".
var headerRE = regexp.MustCompile(`^═+╡ EXCEPTION CAUGHT BY (.+?) ╞═*\s*$`)

// ParseText parses an error as flutter prints it where structured errors
// are off: a whole block (header to footer), or the one-line "Another
// exception was thrown: S". ok is false for text that is neither.
func ParseText(text string, p Project) (e Error, ok bool) {
	text = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "flutter: "))
	if s, ok := strings.CutPrefix(text, anotherPrefix); ok {
		return Error{Summary: bound(s, maxSummary), Repeat: true, Text: bound(text, maxText)}, true
	}
	lines := strings.Split(text, "\n")
	for i := range lines {
		lines[i] = strings.TrimPrefix(lines[i], "flutter: ")
	}
	m := headerRE.FindStringSubmatch(lines[0])
	if m == nil {
		return Error{}, false
	}
	e = Error{Library: strings.ToLower(bound(m[1], maxField)), Text: bound(text, maxText)}
	for i := 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case e.Summary == "" && i == 2 && l != "":
			e.Summary = bound(l, maxSummary) // the line after "The following … was thrown …:"
		case l == "The relevant error-causing widget was:" && i+1 < len(lines) && e.Widget == "":
			e.Widget, e.Location = widgetLocation(lines[i+1], p)
		case strings.HasPrefix(l, "#") && e.Frame == "":
			e.Frame = projectFrame(l, p)
		}
	}
	if e.Summary == "" {
		return Error{}, false
	}
	return e, true
}

// bound cuts s to n bytes on a rune boundary, invalid UTF-8 replaced.
func bound(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
