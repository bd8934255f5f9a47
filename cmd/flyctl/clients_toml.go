package main

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reads and edits Codex's config.toml as text, for when the
// codex CLI (codex mcp add, which edits it the same way) is not there.
// Codex keeps its MCP servers as tables, [mcp_servers.NAME] with command
// and args (and subtables such as [mcp_servers.NAME.env]). Rather than
// take a TOML library that would rewrite the whole file, flyctl scans it
// (strings, arrays, inline tables, comments, multi-line strings) well
// enough to know where each statement and table begins and ends, reads
// the servers' command and args, and adds, replaces or cuts the text of
// one server's tables: every other byte stays as it was. A server defined
// in another form (an inline table, dotted keys) is read but not edited;
// a file it cannot scan is left alone with an error.

// codexServer is one server of a Codex config.toml.
type codexServer struct {
	name    string
	regions [][2]int // the text of its tables: [start, end)
	inline  bool     // defined as an inline table or by dotted keys
	command string
	args    []string
	// argsOK: args is absent or an array of strings.
	argsOK bool
}

// codexConfig is a scanned config.toml.
type codexConfig struct {
	orig    []byte
	servers []*codexServer
}

func (c *codexConfig) server(name string) *codexServer {
	for _, s := range c.servers {
		if s.name == name {
			return s
		}
	}
	return nil
}

// parseCodexConfig scans a Codex config.toml.
func parseCodexConfig(b []byte) (*codexConfig, error) {
	c := &codexConfig{orig: b}
	s := &tomlScanner{b: b}
	var table []string     // the path of the current [table]
	var owner *codexServer // the server whose table the text is in
	get := func(name string) *codexServer {
		if srv := c.server(name); srv != nil {
			return srv
		}
		srv := &codexServer{name: name, argsOK: true}
		c.servers = append(c.servers, srv)
		return srv
	}
	extend := func(end int) {
		if owner != nil {
			owner.regions[len(owner.regions)-1][1] = end
		}
	}
	for {
		lineStart, ok, err := s.nextStatement()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if s.peek() == '[' {
			array := s.peekAt(1) == '['
			s.i++
			if array {
				s.i++
			}
			path, err := s.keyPath()
			if err != nil {
				return nil, err
			}
			if !s.consume(']') || array && !s.consume(']') {
				return nil, s.errorf("a table header does not end with ]")
			}
			end, err := s.endOfLine()
			if err != nil {
				return nil, err
			}
			table, owner = path, nil
			if !array && len(path) >= 2 && path[0] == "mcp_servers" {
				owner = get(path[1])
				owner.regions = append(owner.regions, [2]int{lineStart, end})
			}
			continue
		}
		path, err := s.keyPath()
		if err != nil {
			return nil, err
		}
		if !s.consume('=') {
			return nil, s.errorf("a key is not followed by =")
		}
		s.skipBlanks()
		v, err := s.value()
		if err != nil {
			return nil, err
		}
		end, err := s.endOfLine()
		if err != nil {
			return nil, err
		}
		full := append(slices.Clone(table), path...)
		switch {
		case owner != nil && len(full) == 3:
			extend(end)
			setServerField(owner, full[2], v)
		case owner != nil:
			extend(end)
		case len(full) >= 2 && full[0] == "mcp_servers":
			srv := get(full[1])
			srv.inline = true
			switch {
			case len(full) == 2:
				if m, ok := v.(map[string]any); ok {
					for k, fv := range m {
						setServerField(srv, k, fv)
					}
				}
			case len(full) == 3:
				setServerField(srv, full[2], v)
			}
		case len(full) == 1 && full[0] == "mcp_servers":
			if m, ok := v.(map[string]any); ok {
				for name := range m {
					get(name).inline = true
				}
			}
		}
	}
	return c, nil
}

func setServerField(s *codexServer, key string, v any) {
	switch key {
	case "command":
		s.command, _ = v.(string)
	case "args":
		s.args, s.argsOK = nil, false
		list, ok := v.([]any)
		if !ok {
			return
		}
		for _, a := range list {
			str, ok := a.(string)
			if !ok {
				return
			}
			s.args = append(s.args, str)
		}
		s.argsOK = true
	}
}

// setServer returns the file with the server name set to command and
// args: its tables replaced in place by one, or a table added at the end.
func (c *codexConfig) setServer(name, command string, args []string) ([]byte, error) {
	table := codexTable(name, command, args, eolOf(c.orig))
	srv := c.server(name)
	if srv != nil && srv.inline {
		return nil, fmt.Errorf("it defines mcp_servers.%s as an inline table or with dotted keys, which flyctl does not edit", name)
	}
	if srv == nil || len(srv.regions) == 0 {
		out := bytes.Clone(c.orig)
		eol := eolOf(out)
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, eol...)
		}
		if len(bytes.TrimSpace(out)) > 0 {
			out = append(out, eol...)
		}
		return append(out, table...), nil
	}
	out := c.orig
	for i := len(srv.regions) - 1; i >= 1; i-- {
		out = cutRegion(out, srv.regions[i])
	}
	r := srv.regions[0]
	return splice(out, r[0], r[1], table), nil
}

// removeServer returns the file without the tables of the server name,
// and whether it had any.
func (c *codexConfig) removeServer(name string) ([]byte, bool, error) {
	srv := c.server(name)
	if srv == nil {
		return c.orig, false, nil
	}
	if srv.inline {
		return nil, false, fmt.Errorf("it defines mcp_servers.%s as an inline table or with dotted keys, which flyctl does not edit", name)
	}
	out := c.orig
	for i := len(srv.regions) - 1; i >= 0; i-- {
		out = cutRegion(out, srv.regions[i])
	}
	return out, true, nil
}

// cutRegion removes b[r[0]:r[1]], and a blank line with it where it sat
// between two.
func cutRegion(b []byte, r [2]int) []byte {
	before, after := b[:r[0]], b[r[1]:]
	blankBefore := bytes.HasSuffix(before, []byte("\n\n")) || bytes.HasSuffix(before, []byte("\n\r\n"))
	if blankBefore && (len(after) == 0 || after[0] == '\n' || bytes.HasPrefix(after, []byte("\r\n"))) {
		n := 1
		if bytes.HasSuffix(before, []byte("\r\n")) {
			n = 2
		}
		before = before[:len(before)-n]
	}
	out := make([]byte, 0, len(before)+len(after))
	return append(append(out, before...), after...)
}

// codexTable is the text of a [mcp_servers.NAME] table, as codex mcp add
// writes it.
func codexTable(name, command string, args []string, eol string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = tomlString(a)
	}
	return "[mcp_servers." + tomlKey(name) + "]" + eol +
		"command = " + tomlString(command) + eol +
		"args = [" + strings.Join(quoted, ", ") + "]" + eol
}

// eolOf is the line ending b uses: "\r\n" if any line ends so.
func eolOf(b []byte) string {
	if bytes.Contains(b, []byte("\r\n")) {
		return "\r\n"
	}
	return "\n"
}

// tomlKey is name as a key: bare when it can be.
func tomlKey(name string) string {
	if name != "" && strings.IndexFunc(name, func(r rune) bool { return !isBareKeyChar(r) }) < 0 {
		return name
	}
	return tomlString(name)
}

func isBareKeyChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-'
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlScanner reads TOML statements and values from b.
type tomlScanner struct {
	b []byte
	i int
}

func (s *tomlScanner) errorf(format string, args ...any) error {
	line := bytes.Count(s.b[:min(s.i, len(s.b))], []byte("\n")) + 1
	return fmt.Errorf("line %d: "+format, append([]any{line}, args...)...)
}

func (s *tomlScanner) peek() byte { return s.peekAt(0) }

func (s *tomlScanner) peekAt(n int) byte {
	if s.i+n < len(s.b) {
		return s.b[s.i+n]
	}
	return 0
}

func (s *tomlScanner) consume(c byte) bool {
	s.skipBlanks()
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// skipBlanks skips spaces and tabs.
func (s *tomlScanner) skipBlanks() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t') {
		s.i++
	}
}

// skipComment skips a comment up to (not past) the end of its line.
func (s *tomlScanner) skipComment() {
	if s.peek() == '#' {
		for s.i < len(s.b) && s.b[s.i] != '\n' {
			s.i++
		}
	}
}

// skipLayout skips blanks, newlines and comments (inside arrays and
// inline tables).
func (s *tomlScanner) skipLayout() {
	for {
		s.skipBlanks()
		s.skipComment()
		switch s.peek() {
		case '\n':
			s.i++
		case '\r':
			if s.peekAt(1) != '\n' {
				return
			}
			s.i += 2
		default:
			return
		}
	}
}

// nextStatement moves to the start of the next statement (a table header
// or a key), past blank lines and comments, and returns the offset of the
// start of its line; ok is false at the end.
func (s *tomlScanner) nextStatement() (lineStart int, ok bool, err error) {
	for {
		lineStart = s.i
		s.skipBlanks()
		s.skipComment()
		switch s.peek() {
		case 0:
			if s.i >= len(s.b) {
				return 0, false, nil
			}
			return 0, false, s.errorf("a NUL byte")
		case '\n':
			s.i++
		case '\r':
			if s.peekAt(1) != '\n' {
				return 0, false, s.errorf("a lone carriage return")
			}
			s.i += 2
		default:
			return lineStart, true, nil
		}
	}
}

// endOfLine reads what may follow a statement on its line (blanks and a
// comment) and the line's end, and returns the offset after it.
func (s *tomlScanner) endOfLine() (int, error) {
	s.skipBlanks()
	s.skipComment()
	switch {
	case s.i >= len(s.b):
		return s.i, nil
	case s.peek() == '\n':
		s.i++
		return s.i, nil
	case s.peek() == '\r' && s.peekAt(1) == '\n':
		s.i += 2
		return s.i, nil
	}
	return 0, s.errorf("unexpected %q after a value", s.peek())
}

// keyPath reads a dotted key: bare or quoted parts.
func (s *tomlScanner) keyPath() ([]string, error) {
	var path []string
	for {
		s.skipBlanks()
		var part string
		switch c := s.peek(); {
		case c == '"' || c == '\'':
			if s.peekAt(1) == c && s.peekAt(2) == c {
				return nil, s.errorf("a multi-line string as a key")
			}
			v, err := s.value()
			if err != nil {
				return nil, err
			}
			part = v.(string)
		default:
			start := s.i
			for s.i < len(s.b) && isBareKeyChar(rune(s.b[s.i])) {
				s.i++
			}
			if s.i == start {
				return nil, s.errorf("expected a key, found %q", s.peek())
			}
			part = string(s.b[start:s.i])
		}
		path = append(path, part)
		s.skipBlanks()
		if s.peek() != '.' {
			return path, nil
		}
		s.i++
	}
}

// tomlOther stands for a value flyctl does not need (a number, a date,
// a boolean).
type tomlOther struct{}

// value reads one value: a string, an array ([]any), an inline table
// (map[string]any) or anything else (tomlOther).
func (s *tomlScanner) value() (any, error) {
	switch c := s.peek(); c {
	case '"', '\'':
		if s.peekAt(1) == c && s.peekAt(2) == c {
			return s.multilineString(c)
		}
		return s.string(c)
	case '[':
		s.i++
		var list []any
		for {
			s.skipLayout()
			if s.peek() == ']' {
				s.i++
				return list, nil
			}
			v, err := s.value()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			s.skipLayout()
			switch s.peek() {
			case ',':
				s.i++
			case ']':
			default:
				return nil, s.errorf("unexpected %q in an array", s.peek())
			}
		}
	case '{':
		s.i++
		m := map[string]any{}
		for {
			s.skipLayout()
			if s.peek() == '}' {
				s.i++
				return m, nil
			}
			path, err := s.keyPath()
			if err != nil {
				return nil, err
			}
			if !s.consume('=') {
				return nil, s.errorf("a key in an inline table is not followed by =")
			}
			s.skipBlanks()
			v, err := s.value()
			if err != nil {
				return nil, err
			}
			m[strings.Join(path, ".")] = v
			s.skipLayout()
			switch s.peek() {
			case ',':
				s.i++
			case '}':
			default:
				return nil, s.errorf("unexpected %q in an inline table", s.peek())
			}
		}
	case 0, '\n', '\r', '#', ',', ']', '}':
		return nil, s.errorf("a key without a value")
	}
	// A number, boolean or date: up to what ends a value. A date and a
	// time may be separated by a space.
	start := s.i
	for s.i < len(s.b) && !strings.ContainsRune(" \t\r\n,]}#", rune(s.b[s.i])) {
		s.i++
	}
	if s.peek() == ' ' && s.i-start == 10 && '0' <= s.peekAt(1) && s.peekAt(1) <= '9' {
		s.i++
		for s.i < len(s.b) && !strings.ContainsRune(" \t\r\n,]}#", rune(s.b[s.i])) {
			s.i++
		}
	}
	return tomlOther{}, nil
}

// string reads a one-line basic ("...") or literal ('...') string.
func (s *tomlScanner) string(quote byte) (string, error) {
	s.i++
	var b strings.Builder
	for {
		if s.i >= len(s.b) || s.b[s.i] == '\n' || s.b[s.i] == '\r' {
			return "", s.errorf("an unterminated string")
		}
		c := s.b[s.i]
		switch {
		case c == quote:
			s.i++
			return b.String(), nil
		case c == '\\' && quote == '"':
			if err := s.escape(&b); err != nil {
				return "", err
			}
		default:
			b.WriteByte(c)
			s.i++
		}
	}
}

// multilineString reads a multi-line string: between three double
// quotes, or three single quotes.
func (s *tomlScanner) multilineString(quote byte) (string, error) {
	s.i += 3
	// A newline right after the opening quotes is not part of it.
	if s.peek() == '\n' {
		s.i++
	} else if s.peek() == '\r' && s.peekAt(1) == '\n' {
		s.i += 2
	}
	var b strings.Builder
	for {
		if s.i >= len(s.b) {
			return "", s.errorf("an unterminated multi-line string")
		}
		c := s.b[s.i]
		switch {
		case c == quote && s.peekAt(1) == quote && s.peekAt(2) == quote:
			// Up to two more quotes may end the content.
			s.i += 3
			for n := 0; n < 2 && s.peek() == quote; n++ {
				b.WriteByte(quote)
				s.i++
			}
			return b.String(), nil
		case c == '\\' && quote == '"':
			// A backslash at the end of a line trims the line break
			// and the blanks after it.
			j := s.i + 1
			for j < len(s.b) && (s.b[j] == ' ' || s.b[j] == '\t') {
				j++
			}
			if j < len(s.b) && (s.b[j] == '\n' || s.b[j] == '\r') {
				s.i = j
				for s.i < len(s.b) && strings.ContainsRune(" \t\r\n", rune(s.b[s.i])) {
					s.i++
				}
				continue
			}
			if err := s.escape(&b); err != nil {
				return "", err
			}
		default:
			b.WriteByte(c)
			s.i++
		}
	}
}

// escape reads the escape sequence at s.i (a backslash) into b.
func (s *tomlScanner) escape(b *strings.Builder) error {
	c := s.peekAt(1)
	simple := map[byte]string{'b': "\b", 't': "\t", 'n': "\n", 'f': "\f", 'r': "\r", 'e': "\x1b", '"': `"`, '\\': `\`}
	if r, ok := simple[c]; ok {
		b.WriteString(r)
		s.i += 2
		return nil
	}
	n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
	if n == 0 || s.i+2+n > len(s.b) {
		return s.errorf("an invalid escape sequence")
	}
	v, err := strconv.ParseUint(string(s.b[s.i+2:s.i+2+n]), 16, 32)
	if err != nil || !utf8.ValidRune(rune(v)) {
		return s.errorf("an invalid escape sequence")
	}
	b.WriteRune(rune(v))
	s.i += 2 + n
	return nil
}
