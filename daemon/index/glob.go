package index

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Glob is a compiled path pattern, matched against slash-separated paths
// relative to the workspace root:
//
//   - any run of characters but '/'
//     ?       one character but '/'
//     **      any run of characters, '/' included; "**/" also matches nothing,
//     so "**/*.dart" matches "main.dart" and "lib/src/a.dart"
//     {a,b}   either alternative (they may hold patterns, and nest)
//     [abc]   one of the characters; [a-z] a range; [!a] or [^a] any other
//     \x      the character x itself
//
// A pattern without a '/' matches at any depth, as .gitignore does:
// "*.dart" is "**/*.dart". It is compiled to an RE2 regular expression, so
// matching takes time linear in the path, whatever the pattern.
type Glob struct {
	pattern string
	re      *regexp.Regexp
	suffix  string // a literal every match ends with: a cheap first test

	// The common shapes "**/S" and "D/**/S", where D is a literal
	// directory and S one name pattern without braces, are matched
	// without the regexp: a prefix test and path.Match on the base name.
	fast     bool
	fastDir  string // D + "/", or ""
	fastName string // S, in path.Match syntax
	anyName  bool   // S is "*" and a literal: the suffix test is the whole test
}

// Bounds of a glob, so that a hostile pattern cannot make flyd compile a
// huge expression.
const (
	maxGlobLen   = 1024
	maxGlobDepth = 16
)

// ErrGlob is wrapped by the errors of CompileGlob.
var ErrGlob = errors.New("invalid glob")

// CompileGlob compiles pattern.
func CompileGlob(pattern string) (*Glob, error) {
	if pattern == "" {
		return nil, fmt.Errorf("%w: empty pattern", ErrGlob)
	}
	if len(pattern) > maxGlobLen {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrGlob, len(pattern), maxGlobLen)
	}
	p := strings.TrimPrefix(pattern, "./")
	if strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("%w: %q is absolute; globs are relative to the workspace root", ErrGlob, pattern)
	}
	if !strings.Contains(p, "/") {
		p = "**/" + p
	}
	var b strings.Builder
	b.WriteString(`\A`)
	c := globCompiler{src: p, out: &b}
	if err := c.seq(0, false); err != nil {
		return nil, err
	}
	if c.pos < len(p) {
		return nil, fmt.Errorf("%w: unexpected %q at %d in %q", ErrGlob, p[c.pos], c.pos, pattern)
	}
	b.WriteString(`\z`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrGlob, pattern, err)
	}
	g := &Glob{pattern: pattern, re: re, suffix: literalSuffix(p)}
	g.fastDir, g.fastName, g.fast = fastShape(p)
	g.anyName = g.fast && strings.HasPrefix(g.fastName, "*") && !strings.ContainsAny(g.fastName[1:], "*?[") && g.suffix == g.fastName[1:]
	return g, nil
}

// fastShape recognizes "**/S" and "D/**/S" (see Glob).
func fastShape(p string) (dir, name string, ok bool) {
	i := strings.LastIndex(p, "**/")
	if i < 0 {
		return "", "", false
	}
	head, name := p[:i], p[i+3:]
	if strings.ContainsAny(name, "/{}\\") || strings.ContainsAny(head, "*?[]{}\\") || (head != "" && !strings.HasSuffix(head, "/")) {
		return "", "", false
	}
	name = strings.ReplaceAll(name, "[!", "[^")
	if _, err := path.Match(name, ""); err != nil {
		return "", "", false
	}
	return head, name, true
}

// String returns the pattern as given.
func (g *Glob) String() string { return g.pattern }

// Match reports whether the relative path p matches.
func (g *Glob) Match(p string) bool {
	if g.suffix != "" && !strings.HasSuffix(p, g.suffix) {
		return false
	}
	if g.fast {
		if !strings.HasPrefix(p, g.fastDir) {
			return false
		}
		if g.anyName {
			return true
		}
		ok, _ := path.Match(g.fastName, path.Base(p))
		return ok
	}
	return g.re.MatchString(p)
}

// literalSuffix is the literal text after the last special character of
// p, if no alternation could change how a match ends.
func literalSuffix(p string) string {
	i := strings.LastIndexAny(p, `*?]}\`)
	if strings.ContainsAny(p, "{") && i < strings.LastIndexByte(p, '{') {
		return ""
	}
	s := p[i+1:]
	if strings.HasSuffix(p[:i+1], "**") {
		s = strings.TrimPrefix(s, "/") // "**/" may match nothing, slash included
	}
	if strings.ContainsAny(s, "[{,") {
		return ""
	}
	return s
}

type globCompiler struct {
	src string
	pos int
	out *strings.Builder
}

// seq compiles a sequence up to the end, or, inside braces, up to the ',' or
// '}' that ends the alternative.
func (c *globCompiler) seq(depth int, inBraces bool) error {
	if depth > maxGlobDepth {
		return fmt.Errorf("%w: braces nested deeper than %d", ErrGlob, maxGlobDepth)
	}
	for c.pos < len(c.src) {
		ch := c.src[c.pos]
		switch {
		case inBraces && (ch == ',' || ch == '}'):
			return nil
		case ch == '*':
			if strings.HasPrefix(c.src[c.pos:], "**") {
				atStart := c.pos == 0 || c.src[c.pos-1] == '/'
				rest := c.src[c.pos+2:]
				switch {
				case atStart && strings.HasPrefix(rest, "/"):
					c.out.WriteString(`(?:.*/)?`) // "**/": any directories, or none
					c.pos += 3
				case atStart && rest == "":
					c.out.WriteString(`.*`)
					c.pos += 2
				default:
					c.out.WriteString(`.*`)
					c.pos += 2
				}
				continue
			}
			c.out.WriteString(`[^/]*`)
			c.pos++
		case ch == '?':
			c.out.WriteString(`[^/]`)
			c.pos++
		case ch == '[':
			if err := c.class(); err != nil {
				return err
			}
		case ch == '{':
			c.pos++
			c.out.WriteString(`(?:`)
			for first := true; ; first = false {
				if !first {
					c.out.WriteString(`|`)
				}
				if err := c.seq(depth+1, true); err != nil {
					return err
				}
				if c.pos >= len(c.src) {
					return fmt.Errorf("%w: unclosed '{' in %q", ErrGlob, c.src)
				}
				if c.src[c.pos] == '}' {
					c.pos++
					break
				}
				c.pos++ // ','
			}
			c.out.WriteString(`)`)
		case ch == '\\':
			if c.pos+1 >= len(c.src) {
				return fmt.Errorf("%w: trailing '\\' in %q", ErrGlob, c.src)
			}
			c.out.WriteString(regexp.QuoteMeta(c.src[c.pos+1 : c.pos+2]))
			c.pos += 2
		default:
			c.out.WriteString(regexp.QuoteMeta(c.src[c.pos : c.pos+1]))
			c.pos++
		}
	}
	return nil
}

// class compiles a [...] character class.
func (c *globCompiler) class() error {
	end := c.pos + 1
	if end < len(c.src) && (c.src[end] == '!' || c.src[end] == '^') {
		end++
	}
	if end < len(c.src) && c.src[end] == ']' {
		end++ // a leading ']' is literal
	}
	for end < len(c.src) && c.src[end] != ']' {
		end++
	}
	if end >= len(c.src) {
		return fmt.Errorf("%w: unclosed '[' in %q", ErrGlob, c.src)
	}
	body := c.src[c.pos+1 : end]
	var b strings.Builder
	b.WriteString("[")
	if body != "" && (body[0] == '!' || body[0] == '^') {
		b.WriteString("^/")
		body = body[1:]
	}
	for _, r := range body {
		switch r {
		case '\\', '[', ']', '^':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteString("]")
	if _, err := regexp.Compile(b.String()); err != nil {
		return fmt.Errorf("%w: bad class [%s] in %q", ErrGlob, c.src[c.pos+1:end], c.src)
	}
	c.out.WriteString(b.String())
	c.pos = end + 1
	return nil
}
