package fakeflutter

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/fly-dev/fly/internal/fileuri"
)

// What the app registers and answers on its VM service beyond errors:
// the widget inspector (debug only, the reference's §3.3) and the
// engine's _flutter.screenshot (debug and profile, §3.5).

// appOptions are what the app is: its build mode and the knobs that
// shape it.
type appOptions struct {
	mode         string
	stamp        bool
	widgets      int // items in the home page's list (EnvWidgets)
	noScreenshot bool
	exit         func() // ext.flutter.exit: the app ends
	// inspectorDelay is how long after the start the isolate registers
	// the inspector's extensions (EnvInspectorDelayMS).
	inspectorDelay time.Duration
}

// inspectorExtensions are the widget inspector's extensions, which exist
// only in debug builds.
var inspectorExtensions = []string{"ext.flutter.reassemble", "ext.flutter.inspector.structuredErrors",
	"ext.flutter.inspector.getRootWidgetTree", "ext.flutter.inspector.disposeGroup", "ext.flutter.inspector.screenshot"}

// extensions are the service extensions the UI isolate has registered.
func (v *vmService) extensions() []string {
	exts := []string{"ext.flutter.debugDumpApp", "ext.flutter.debugDumpRenderTree", "ext.flutter.exit"}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.app.mode == "debug" && v.inspectorReady {
		exts = append(exts, inspectorExtensions...)
	}
	return exts
}

// registerInspector is the framework registering the inspector's
// extensions: each one a ServiceExtensionAdded event on the Isolate
// stream.
func (v *vmService) registerInspector() {
	v.mu.Lock()
	v.inspectorReady = true
	iso := v.isolate
	v.mu.Unlock()
	for _, name := range inspectorExtensions {
		v.postIsolateEvent(map[string]any{"kind": "ServiceExtensionAdded", "extensionRPC": name}, iso)
	}
}

// screenshot answers _flutter.screenshot: a 1080×2400 PNG of the app's
// screen, or the engine's error where it cannot capture.
func (a appOptions) screenshot() (any, *rpcError) {
	if a.noScreenshot {
		return nil, &rpcError{Code: -32000, Message: "Could not capture image screenshot."}
	}
	return map[string]any{"type": "Screenshot", "screenshot": screenPNG()}, nil
}

var screenPNG = sync.OnceValue(func() string {
	const w, h = 1080, 2400
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.NRGBA{R: 250, G: 250, B: 250, A: 255}
			switch {
			case y < 220: // the app bar
				c = color.NRGBA{R: 98, G: 0, B: 238, A: 255}
			case (y-220)%160 < 2: // list dividers
				c = color.NRGBA{R: 200, G: 200, B: 200, A: 255}
			case (y-220)%160 > 40 && (y-220)%160 < 120 && x > 60 && x < 60+(y*7)%600: // text lines
				c = color.NRGBA{R: 40, G: 40, B: 40, A: 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	(&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img)
	return base64.StdEncoding.EncodeToString(b.Bytes())
})

// widgetTree answers ext.flutter.inspector.getRootWidgetTree: the app's
// tree of widgets, the whole tree or (summary) only those its project
// created, in the inspector's node shape. groupName is required, as in
// the framework, where its absence is a null-check exception.
func (a appOptions) widgetTree(root, group string, summary bool) (any, *rpcError) {
	const method = "ext.flutter.inspector.getRootWidgetTree"
	if group == "" {
		details, _ := json.Marshal(map[string]string{"exception": "Null check operator used on a null value", "stack": "#0 WidgetInspectorService._getRootWidgetTree", "method": method})
		return nil, &rpcError{Code: -32000, Message: "Server error", Data: map[string]any{"details": string(details)}}
	}
	t := &treeBuilder{root: root, summary: summary}
	items := make([]*treeNode, a.widgets)
	for i := range items {
		items[i] = t.local("ItemTile", "lib/widgets/item_tile.dart", 9, 12,
			t.local("ListTile", "lib/widgets/item_tile.dart", 14, 12,
				t.local("Text", "lib/widgets/item_tile.dart", 15, 14), t.local("Icon", "lib/widgets/item_tile.dart", 16, 14)))
	}
	home := t.local("MyHomePage", "lib/main.dart", 16, 13,
		t.local("Scaffold", "lib/main.dart", 26, 12,
			t.local("AppBar", "lib/main.dart", 27, 15, t.local("Text", "lib/main.dart", 28, 16)),
			t.local("ListView", "lib/main.dart", 30, 18, items...),
			t.local("FloatingActionButton", "lib/main.dart", 40, 29, t.local("Icon", "lib/main.dart", 41, 16))))
	app := t.local("MyApp", "lib/main.dart", 8, 10, t.local("MaterialApp", "lib/main.dart", 14, 12, home))
	rootNode := &treeNode{"description": "[root]", "type": "_ElementDiagnosticableTreeNode", "widgetRuntimeType": "RenderObjectToWidgetAdapter<RenderBox>",
		"valueId": t.id(), "hasChildren": true, "createdByLocalProject": false, "children": []any{app}}
	return map[string]any{"result": rootNode, "type": "_extensionType", "method": method}, nil
}

type treeNode = map[string]any

// treeBuilder makes inspector nodes; outside a summary each widget of
// the project sits under the framework's own widgets, as in a real tree.
type treeBuilder struct {
	root    string
	summary bool
	n       int
}

func (t *treeBuilder) id() string { t.n++; return "inspector-" + strconv.Itoa(t.n) }

// framework are the widgets the framework puts around a project's widget
// in the full tree.
var framework = []string{"Semantics", "_InheritedTheme", "Builder", "DefaultTextStyle", "Padding"}

func (t *treeBuilder) local(name, file string, line, col int, children ...*treeNode) *treeNode {
	kids := make([]any, len(children))
	for i, c := range children {
		kids[i] = c
	}
	n := &treeNode{"description": name, "type": "_ElementDiagnosticableTreeNode", "widgetRuntimeType": name, "style": "dense",
		"valueId": t.id(), "locationId": t.n, "hasChildren": len(kids) > 0, "createdByLocalProject": true, "summaryTree": t.summary,
		"creationLocation": map[string]any{"file": fileuri.FromPath(filepath.Join(t.root, file)), "line": line, "column": col, "name": name},
		"children":         kids}
	if t.summary {
		return n
	}
	for _, w := range framework[:(line+col)%len(framework)+1] {
		n = &treeNode{"description": w, "type": "_ElementDiagnosticableTreeNode", "widgetRuntimeType": w, "style": "dense",
			"valueId": t.id(), "hasChildren": true, "createdByLocalProject": false, "children": []any{n}}
	}
	return n
}
