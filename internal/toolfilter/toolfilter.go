// Package toolfilter decides which tools one MCP client sees: the terms
// of `flyctl mcp --tools … --disable …` and of `/mcp?tools=…&disable=…`.
//
// A term is a preset or category (matched against a tool's tags), a tool
// name, or a glob over names (path.Match syntax: *, ?, [a-z]). A tool is
// allowed when no --tools term was given or one of them matches it, and
// no --disable term matches it. The catalog of flyd's own tools and their
// tags (catalog.go) is written here once: flyd registers its tools with
// those tags, and flyctl's help lists the presets from them. What
// upstream tools exist the daemon says.
package toolfilter

import (
	"fmt"
	"path"
	"strings"
)

// Bounds on what a client may send.
const (
	MaxTerms   = 64
	MaxTermLen = 128
)

// Filter is one client's tool filter. The zero Filter and nil allow every
// tool.
type Filter struct {
	allow, deny []string
}

// Parse builds a filter from the values of --tools and --disable (or the
// tools and disable query parameters); each value may hold several terms
// separated by commas or spaces.
func Parse(tools, disable []string) (*Filter, error) {
	f := &Filter{}
	var err error
	if f.allow, err = terms("tools", tools); err != nil {
		return nil, err
	}
	if f.deny, err = terms("disable", disable); err != nil {
		return nil, err
	}
	return f, nil
}

func terms(flag string, values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, t := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			if err := checkTerm(t); err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			out = append(out, t)
		}
	}
	if len(out) > MaxTerms {
		return nil, fmt.Errorf("%s: %d terms, at most %d", flag, len(out), MaxTerms)
	}
	return out, nil
}

// checkTerm accepts a name or glob of letters, digits, '_', '-', '.',
// ':' and the glob characters.
func checkTerm(t string) error {
	if len(t) > MaxTermLen {
		return fmt.Errorf("term %.40q… is longer than %d bytes", t, MaxTermLen)
	}
	for _, r := range t {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("_-.:*?[]^!", r):
		default:
			return fmt.Errorf("term %q: %q is not allowed (names, presets, categories and globs of *, ?, [])", t, r)
		}
	}
	if _, err := path.Match(t, ""); err != nil {
		return fmt.Errorf("term %q is not a valid glob: %w", t, err)
	}
	return nil
}

// Empty reports whether f lets every tool through.
func (f *Filter) Empty() bool { return f == nil || len(f.allow) == 0 && len(f.deny) == 0 }

// Terms returns every term of f, --tools first.
func (f *Filter) Terms() []string {
	if f == nil {
		return nil
	}
	return append(append([]string(nil), f.allow...), f.deny...)
}

// String is the filter as flags would give it: "tools=app,files
// disable=sdk".
func (f *Filter) String() string {
	if f.Empty() {
		return "all tools"
	}
	var parts []string
	if len(f.allow) > 0 {
		parts = append(parts, "tools="+strings.Join(f.allow, ","))
	}
	if len(f.deny) > 0 {
		parts = append(parts, "disable="+strings.Join(f.deny, ","))
	}
	return strings.Join(parts, " ")
}

// Allows reports whether the tool name with tags passes f; when it does
// not, why says which term decided.
func (f *Filter) Allows(name string, tags []string) (ok bool, why string) {
	if f == nil {
		return true, ""
	}
	for _, t := range f.deny {
		if matches(t, name, tags) {
			return false, fmt.Sprintf("disabled by the term %q of this session's tool filter (%s)", t, f)
		}
	}
	if len(f.allow) == 0 {
		return true, ""
	}
	for _, t := range f.allow {
		if matches(t, name, tags) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("not among this session's tools (%s)", f)
}

// matches reports whether the term t names the tool: its name, one of its
// tags, or a glob that matches its name.
func matches(t, name string, tags []string) bool {
	if t == name {
		return true
	}
	for _, g := range tags {
		if t == g {
			return true
		}
	}
	ok, _ := path.Match(t, name)
	return ok
}

// IsGlob reports whether the term t holds glob characters.
func IsGlob(t string) bool { return strings.ContainsAny(t, "*?[") }
