package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fly-dev/fly/internal/fileuri"
	"github.com/fly-dev/fly/internal/jsonscan"
	"github.com/fly-dev/fly/internal/safetext"
)

// TreeOptions bound a summary. Zero values mean the defaults.
type TreeOptions struct {
	MaxBytes int // of text (default 8 KiB)
	MaxDepth int // levels of project widgets shown (default 40)
}

// Tree is the summary of a widget tree.
type Tree struct {
	Text      string // one widget a line, indented two spaces a level: "ItemTile  lib/widgets/item_tile.dart:9"
	Widgets   int    // the project's widgets in the tree
	Shown     int    // of which the text shows
	Truncated bool   // widgets were left out for the budget or the depth
}

// maxNodes bounds the nodes read from one answer, whatever its size.
const maxNodes = 200_000

// maxNesting bounds how deep the nodes of one answer nest.
const maxNesting = 5_000

// node is the part of an inspector node the summary reads, with where it
// stands in the tree: nodes are kept flat, parents before children.
type node struct {
	Description           string
	WidgetRuntimeType     string
	CreatedByLocalProject bool
	CreationLocation      *struct {
		File   string `json:"file"`
		Line   int    `json:"line"`
		Column int    `json:"column"`
	}
	parent int // index of the parent node; -1 for the root
}

// Summarize reads the result of ext.flutter.inspector.getRootWidgetTree
// (its "result" node) and lists the widgets the project created,
// indented by their nesting among themselves, each with its location
// relative to root. Framework widgets between them are left out.
//
// It reads the answer in one pass without decoding it whole: at most
// 200,000 nodes nested at most 5,000 deep, each field it keeps bounded;
// an answer past either bound is refused.
func Summarize(result json.RawMessage, root string, opt TreeOptions) (Tree, error) {
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = 8 << 10
	}
	if opt.MaxDepth <= 0 {
		opt.MaxDepth = 40
	}
	nodes, err := flatten(result)
	if err != nil {
		return Tree{}, err
	}
	var t Tree
	var b strings.Builder
	inner := make([]int, len(nodes)) // the depth a node's children are shown at
	for i := range nodes {
		n := &nodes[i]
		depth := 0
		if n.parent >= 0 {
			depth = inner[n.parent]
		}
		inner[i] = depth
		if !n.CreatedByLocalProject {
			continue
		}
		inner[i]++
		t.Widgets++
		line := strings.Repeat("  ", min(depth, opt.MaxDepth)) + name(n)
		if loc := location(n, root); loc != "" {
			line += "  " + loc
		}
		if depth >= opt.MaxDepth || b.Len()+len(line)+1 > opt.MaxBytes {
			t.Truncated = true
		} else {
			b.WriteString(line + "\n")
			t.Shown++
		}
	}
	t.Text = b.String()
	if t.Truncated {
		t.Text += fmt.Sprintf("… %d more widgets left out (%d shown): ask for more bytes or depth\n", t.Widgets-t.Shown, t.Shown)
	}
	return t, nil
}

// errTooLarge refuses a tree past the bounds.
var errTooLarge = errors.New("the widget tree has more than 200,000 nodes or nests more than 5,000 deep")

// flatten reads the tree in data into nodes in depth-first order, each
// after its parent, in one pass over the bytes: children are read where
// they stand, every other value is skipped once.
func flatten(data []byte) ([]node, error) {
	p := flattener{data: data}
	i := jsonscan.Space(data, 0)
	if _, err := p.node(i, -1, 0); err != nil {
		return nil, err
	}
	return p.nodes, nil
}

type flattener struct {
	data  []byte
	nodes []node
}

var errNotNode = errors.New("the widget tree is not an inspector node")

// node reads the node object at data[i] and its children, and returns
// the index after it.
func (p *flattener) node(i, parent, depth int) (int, error) {
	d := p.data
	if len(p.nodes) >= maxNodes || depth > maxNesting {
		return 0, errTooLarge
	}
	if i >= len(d) || d[i] != '{' {
		return 0, errNotNode
	}
	at := len(p.nodes)
	p.nodes = append(p.nodes, node{parent: parent})
	for i++; ; {
		i = jsonscan.Space(d, i)
		if i < len(d) && d[i] == '}' {
			return i + 1, nil
		}
		kEnd := -1
		if i < len(d) && d[i] == '"' {
			kEnd = jsonscan.String(d, i)
		}
		if kEnd < 0 {
			return 0, errNotNode
		}
		key := string(d[i:kEnd])
		i = jsonscan.Space(d, kEnd)
		if i >= len(d) || d[i] != ':' {
			return 0, errNotNode
		}
		i = jsonscan.Space(d, i+1)
		var end int
		if key == `"children"` && i < len(d) && d[i] == '[' {
			var err error
			if end, err = p.children(i, at, depth); err != nil {
				return 0, err
			}
		} else if end = jsonscan.Value(d, i); end < 0 {
			return 0, errNotNode
		}
		p.field(at, key, d[i:end])
		i = jsonscan.Space(d, end)
		switch {
		case i < len(d) && d[i] == ',':
			i++
		case i < len(d) && d[i] == '}':
			return i + 1, nil
		default:
			return 0, errNotNode
		}
	}
}

// children reads the array of child nodes at data[i], and returns the
// index after it.
func (p *flattener) children(i, parent, depth int) (int, error) {
	d := p.data
	for i++; ; {
		i = jsonscan.Space(d, i)
		if i < len(d) && d[i] == ']' {
			return i + 1, nil
		}
		end, err := p.node(i, parent, depth+1)
		if err != nil {
			return 0, err
		}
		i = jsonscan.Space(d, end)
		switch {
		case i < len(d) && d[i] == ',':
			i++
		case i < len(d) && d[i] == ']':
			return i + 1, nil
		default:
			return 0, errNotNode
		}
	}
}

// field keeps what the summary reads of a node's member.
func (p *flattener) field(at int, key string, value []byte) {
	n := &p.nodes[at]
	switch key {
	case `"description"`:
		n.Description = text(value)
	case `"widgetRuntimeType"`:
		n.WidgetRuntimeType = text(value)
	case `"createdByLocalProject"`:
		n.CreatedByLocalProject = string(value) == "true"
	case `"creationLocation"`:
		if len(value) > 8<<10 || json.Unmarshal(value, &n.CreationLocation) != nil {
			n.CreationLocation = nil
		}
	}
}

// text is a JSON string's value, bounded; "" for anything else.
func text(raw []byte) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	if len(raw) > 4<<10 {
		raw = raw[:4<<10] // a name or description; cut before decoding
		for len(raw) > 1 && raw[len(raw)-1] == '\\' {
			raw = raw[:len(raw)-1]
		}
		raw = append(raw[:len(raw):len(raw)], '"')
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func name(n *node) string {
	s := n.WidgetRuntimeType
	if s == "" {
		s = n.Description
	}
	return bound(s, 120)
}

// location is where n was created, relative to root: "lib/x.dart:12";
// the file's URI as given when it lies outside root.
func location(n *node, root string) string {
	l := n.CreationLocation
	if l == nil || l.File == "" {
		return ""
	}
	file := l.File
	if path, ok := fileuri.ToPath(l.File); ok {
		if rel, err := filepath.Rel(filepath.Clean(root), path); err == nil && !strings.HasPrefix(rel, "..") {
			file = filepath.ToSlash(rel)
		}
	}
	return bound(file, 200) + ":" + strconv.Itoa(l.Line)
}

// bound is an app's name or path on one line, cut to n bytes, with any
// escape sequence, control, bidi or zero-width character shown escaped.
func bound(s string, n int) string {
	s = safetext.Field(strings.Join(strings.Fields(s), " "))
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
