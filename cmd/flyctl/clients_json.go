package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// This file edits an MCP client's JSON config file as text: it adds,
// replaces or removes one member of its servers object and leaves every
// other byte as it was (other servers, other keys, their order, the
// indentation, comments), so that flyctl setup and flyctl uninstall
// change nothing but "fly". The files of VS Code and Gemini CLI may hold
// comments and trailing commas (JSONC); blankJSONC makes a copy of the
// same length without them, which is parsed to find where things are,
// while the edits are made in the original.

// maxClientFile bounds a client's config file: Claude Code's ~/.claude.json
// holds every project's history, and grows well past a megabyte.
const maxClientFile = 64 << 20

// errNotJSONObject is the error of a file whose top level is not an object.
var errNotJSONObject = errors.New("its top level is not a JSON object")

// blankJSONC returns a copy of b in which comments (// and /* */) and
// trailing commas (before } or ]) are spaces, newlines kept: the same
// length and line structure, which a JSON parser reads when b is JSONC.
// Strings are left alone.
func blankJSONC(b []byte) []byte {
	out := bytes.Clone(b)
	inString := false
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			end := bytes.Index(out[i+2:], []byte("*/"))
			stop := len(out)
			if end >= 0 {
				stop = i + 2 + end + 2
			}
			for ; i < stop; i++ {
				if out[i] != '\n' && out[i] != '\r' {
					out[i] = ' '
				}
			}
			i--
		}
	}
	// Trailing commas, now that comments are blanks.
	inString = false
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ',':
			j := skipSpace(out, i+1)
			if j < len(out) && (out[j] == '}' || out[j] == ']') {
				out[i] = ' '
			}
		}
	}
	return out
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonMember is one member of an object, by its offsets in the text.
type jsonMember struct {
	key              string
	keyStart         int // the key's opening quote
	valStart, valEnd int // the value, [valStart, valEnd)
}

// jsonObjectSpan is an object in the text: its braces and its members.
type jsonObjectSpan struct {
	open, close int // offsets of { and }
	members     []jsonMember
}

func (o jsonObjectSpan) find(key string) int {
	// A repeated key: the last wins, as JavaScript reads it.
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].key == key {
			return i
		}
	}
	return -1
}

// scanObject reads the object that starts at b[start] ('{') of b, which
// is valid JSON (blankJSONC's output, checked with json.Valid).
func scanObject(b []byte, start int) (jsonObjectSpan, error) {
	o := jsonObjectSpan{open: start}
	if start >= len(b) || b[start] != '{' {
		return o, errNotJSONObject
	}
	i := skipSpace(b, start+1)
	for i < len(b) && b[i] != '}' {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if b[i] != '"' {
			return o, fmt.Errorf("unexpected %q at offset %d", b[i], i)
		}
		kEnd, err := skipJSONValue(b, i)
		if err != nil {
			return o, err
		}
		var key string
		if err := json.Unmarshal(b[i:kEnd], &key); err != nil {
			return o, err
		}
		j := skipSpace(b, kEnd)
		if j >= len(b) || b[j] != ':' {
			return o, fmt.Errorf("no colon after key %q", key)
		}
		vStart := skipSpace(b, j+1)
		vEnd, err := skipJSONValue(b, vStart)
		if err != nil {
			return o, err
		}
		o.members = append(o.members, jsonMember{key: key, keyStart: i, valStart: vStart, valEnd: vEnd})
		i = skipSpace(b, vEnd)
	}
	if i >= len(b) {
		return o, errors.New("unterminated object")
	}
	o.close = i
	return o, nil
}

// skipJSONValue returns the offset just after the value at b[i].
func skipJSONValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("unexpected end of JSON")
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, nil
			}
		}
		return 0, errors.New("unterminated string")
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipJSONValue(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated object or array")
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[j])) {
		j++
	}
	if j == i {
		return 0, fmt.Errorf("unexpected %q at offset %d", b[i], i)
	}
	return j, nil
}

// jsonDoc is a client's config file, read for editing.
type jsonDoc struct {
	orig    []byte
	blank   []byte // blankJSONC(orig)
	top     jsonObjectSpan
	empty   bool // the file is empty or only blanks: it has no object yet
	servers *jsonObjectSpan
	key     string // the servers object's key: "mcpServers" or "servers"
}

// parseJSONDoc reads a client's config file (JSON, or JSONC) and finds
// its servers object under key. It refuses anything it could not edit
// without rewriting other parts.
func parseJSONDoc(orig []byte, key string) (*jsonDoc, error) {
	d := &jsonDoc{orig: orig, blank: blankJSONC(orig), key: key}
	start := skipSpace(d.blank, 0)
	if start == len(d.blank) {
		d.empty = true
		return d, nil
	}
	if !json.Valid(d.blank) {
		var v any
		err := json.Unmarshal(d.blank, &v)
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	top, err := scanObject(d.blank, start)
	if err != nil {
		return nil, err
	}
	d.top = top
	if i := top.find(key); i >= 0 {
		m := top.members[i]
		switch d.blank[m.valStart] {
		case '{':
			s, err := scanObject(d.blank, m.valStart)
			if err != nil {
				return nil, err
			}
			d.servers = &s
		case 'n': // null: no servers
		default:
			return nil, fmt.Errorf("%q is not an object", key)
		}
	}
	return d, nil
}

// servers returns the entries of the servers object: each server's name
// and its JSON as it is in the file (comments blanked).
func (d *jsonDoc) entries() (names []string, raw map[string]json.RawMessage) {
	raw = map[string]json.RawMessage{}
	if d.servers == nil {
		return nil, raw
	}
	for _, m := range d.servers.members {
		if _, ok := raw[m.key]; !ok {
			names = append(names, m.key)
		}
		raw[m.key] = json.RawMessage(d.blank[m.valStart:m.valEnd])
	}
	return names, raw
}

// set returns the file with the server name set to value (replacing the
// value of an existing entry in place, else adding it at the end of the
// servers object, which is made if need be), indented as the file is.
func (d *jsonDoc) set(name string, value any) ([]byte, error) {
	unit := d.indentUnit()
	if d.empty {
		v, err := indentedJSON(value, unit+unit, unit)
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "{\n%s%s: {\n%s%s%s: %s\n%s}\n}\n", unit, quoteJSON(d.key), unit, unit, quoteJSON(name), v, unit)
		return []byte(b.String()), nil
	}
	if d.servers == nil {
		// Add (or fill a null) "key": {"name": value} to the top object.
		obj := map[string]any{name: value}
		if i := d.top.find(d.key); i >= 0 {
			m := d.top.members[i]
			v, err := indentedJSON(obj, d.lineIndent(m.keyStart), unit)
			if err != nil {
				return nil, err
			}
			return splice(d.orig, m.valStart, m.valEnd, d.nl(v)), nil
		}
		return d.insert(d.top, d.key, obj, unit)
	}
	if i := d.servers.find(name); i >= 0 {
		m := d.servers.members[i]
		v, err := indentedJSON(value, d.lineIndent(m.keyStart), unit)
		if err != nil {
			return nil, err
		}
		return splice(d.orig, m.valStart, m.valEnd, d.nl(v)), nil
	}
	return d.insert(*d.servers, name, value, unit)
}

// insert adds the member key: value at the end of the object o.
func (d *jsonDoc) insert(o jsonObjectSpan, key string, value any, unit string) ([]byte, error) {
	if len(o.members) == 0 {
		outer := d.lineIndent(o.open)
		v, err := indentedJSON(value, outer+unit, unit)
		if err != nil {
			return nil, err
		}
		text := "\n" + outer + unit + quoteJSON(key) + ": " + v + "\n" + outer
		return splice(d.orig, o.open+1, o.close, d.nl(text)), nil
	}
	first, last := o.members[0], o.members[len(o.members)-1]
	if !bytes.ContainsAny(d.blank[o.open:first.keyStart], "\n") {
		// A compact object: add compactly.
		v, err := json.Marshal(value)
		if err != nil {
			return nil, err
		}
		return splice(d.orig, last.valEnd, last.valEnd, ", "+quoteJSON(key)+": "+string(v)), nil
	}
	indent := d.lineIndent(last.keyStart)
	v, err := indentedJSON(value, indent, unit)
	if err != nil {
		return nil, err
	}
	member := indent + quoteJSON(key) + ": " + v
	// When the last member's line goes on with a comment (or a trailing
	// comma) only, the comment stays with it: the comma goes after the
	// value, the new member on a line of its own after that line.
	if eol := bytes.IndexByte(d.blank[last.valEnd:], '\n'); eol >= 0 {
		lineEnd := last.valEnd + eol + 1
		rest := d.blank[last.valEnd:lineEnd]
		origRest := bytes.TrimSpace(d.orig[last.valEnd:lineEnd])
		if len(bytes.TrimSpace(rest)) == 0 && len(origRest) > 0 {
			out := splice(d.orig, lineEnd, lineEnd, d.nl(member+"\n"))
			if origRest[0] == ',' { // JSONC's trailing comma: it is there already
				return out, nil
			}
			return splice(out, last.valEnd, last.valEnd, ","), nil
		}
	}
	return splice(d.orig, last.valEnd, last.valEnd, d.nl(",\n"+member)), nil
}

// nl gives text the file's line endings.
func (d *jsonDoc) nl(text string) string {
	if eol := eolOf(d.orig); eol != "\n" {
		return strings.ReplaceAll(text, "\n", eol)
	}
	return text
}

// remove returns the file without the server name (every member of
// that name), and whether it had one. The members around it, and the rest
// of the file, are as they were.
func (d *jsonDoc) remove(name string) ([]byte, bool, error) {
	cur, found := d, false
	for cur.servers != nil {
		o := *cur.servers
		k := o.find(name)
		if k < 0 {
			break
		}
		found = true
		var out []byte
		switch {
		case len(o.members) == 1:
			out = splice(cur.orig, o.open+1, o.close, "")
		case k+1 < len(o.members):
			out = splice(cur.orig, o.members[k].keyStart, o.members[k+1].keyStart, "")
		default:
			out = cur.cutLast(o.members[k-1], o.members[k])
		}
		next, err := parseJSONDoc(out, d.key)
		if err != nil {
			return nil, false, fmt.Errorf("remove %q: %w", name, err)
		}
		cur = next
	}
	return cur.orig, found, nil
}

// cutLast returns the file without the last member m of its object, prev
// being the member before it. When m is on lines of its own, the comma
// after prev goes (a comment after it stays) and so do m's lines;
// otherwise the text from prev's value to m's.
func (d *jsonDoc) cutLast(prev, m jsonMember) []byte {
	comma := prev.valEnd + bytes.IndexByte(d.blank[prev.valEnd:m.keyStart], ',')
	lineStart := bytes.LastIndexByte(d.blank[:m.keyStart], '\n') + 1
	if comma < prev.valEnd || lineStart <= comma || len(bytes.TrimSpace(d.blank[lineStart:m.keyStart])) > 0 {
		return splice(d.orig, prev.valEnd, m.valEnd, "")
	}
	end := m.valEnd
	if eol := bytes.IndexByte(d.blank[end:], '\n'); eol >= 0 && len(bytes.TrimSpace(d.blank[end:end+eol])) == 0 {
		end += eol + 1
	}
	out := splice(d.orig, lineStart, end, "")
	return splice(out, comma, comma+1, "")
}

// lineIndent is the blanks that begin the line holding offset i (up to
// the first other character).
func (d *jsonDoc) lineIndent(i int) string {
	start := bytes.LastIndexByte(d.orig[:i], '\n') + 1
	j := start
	for j < len(d.orig) && (d.orig[j] == ' ' || d.orig[j] == '\t') {
		j++
	}
	return string(d.orig[start:j])
}

// indentUnit is one level of the file's indentation: the indentation of
// its first indented line, else two spaces.
func (d *jsonDoc) indentUnit() string {
	for _, line := range strings.Split(string(d.blank), "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed == "" || len(trimmed) == len(line) {
			continue
		}
		return line[:len(line)-len(trimmed)]
	}
	return "  "
}

// indentedJSON encodes v indented by unit, its lines after the first
// prefixed by prefix, without HTML escaping.
func indentedJSON(v any, prefix, unit string) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, unit)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// splice returns b with b[i:j] replaced by s, in a new slice.
func splice(b []byte, i, j int, s string) []byte {
	out := make([]byte, 0, len(b)-(j-i)+len(s))
	out = append(out, b[:i]...)
	out = append(out, s...)
	return append(out, b[j:]...)
}
