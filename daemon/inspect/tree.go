package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
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

// node is the part of an inspector node the summary reads.
type node struct {
	Description           string `json:"description"`
	WidgetRuntimeType     string `json:"widgetRuntimeType"`
	CreatedByLocalProject bool   `json:"createdByLocalProject"`
	CreationLocation      *struct {
		File   string `json:"file"`
		Line   int    `json:"line"`
		Column int    `json:"column"`
	} `json:"creationLocation"`
	Children []node `json:"children"`
}

// Summarize reads the result of ext.flutter.inspector.getRootWidgetTree
// (its "result" node) and lists the widgets the project created,
// indented by their nesting among themselves, each with its location
// relative to root. Framework widgets between them are left out.
func Summarize(result json.RawMessage, root string, opt TreeOptions) (Tree, error) {
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = 8 << 10
	}
	if opt.MaxDepth <= 0 {
		opt.MaxDepth = 40
	}
	var top node
	if err := json.Unmarshal(result, &top); err != nil {
		return Tree{}, fmt.Errorf("the widget tree is not an inspector node: %w", err)
	}
	var t Tree
	var b strings.Builder
	seen := 0
	var walk func(n *node, depth int) error
	walk = func(n *node, depth int) error {
		if seen++; seen > maxNodes {
			return errors.New("the widget tree has more than 200,000 nodes")
		}
		if n.CreatedByLocalProject {
			t.Widgets++
			line := strings.Repeat("  ", depth) + name(n)
			if loc := location(n, root); loc != "" {
				line += "  " + loc
			}
			if depth >= opt.MaxDepth || b.Len()+len(line)+1 > opt.MaxBytes {
				t.Truncated = true
			} else {
				b.WriteString(line + "\n")
				t.Shown++
			}
			depth++
		}
		for i := range n.Children {
			if err := walk(&n.Children[i], depth); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(&top, 0); err != nil {
		return Tree{}, err
	}
	t.Text = b.String()
	if t.Truncated {
		t.Text += fmt.Sprintf("… %d more widgets left out (%d shown): ask for more bytes or depth\n", t.Widgets-t.Shown, t.Shown)
	}
	return t, nil
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
	if u, err := url.Parse(l.File); err == nil && u.Scheme == "file" {
		if rel, err := filepath.Rel(filepath.Clean(root), filepath.FromSlash(u.Path)); err == nil && !strings.HasPrefix(rel, "..") {
			file = filepath.ToSlash(rel)
		}
	}
	return bound(file, 200) + ":" + strconv.Itoa(l.Line)
}

func bound(s string, n int) string {
	s = strings.ToValidUTF8(strings.Join(strings.Fields(s), " "), "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
