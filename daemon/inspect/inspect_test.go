package inspect

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"runtime"
	"strings"
	"testing"
)

// tree is an inspector answer's shape: a framework root, the project's
// MyApp, a framework wrapper, then n project tiles.
func tree(n int) json.RawMessage {
	var tiles []string
	for i := range n {
		tiles = append(tiles, fmt.Sprintf(`{"description":"Padding","createdByLocalProject":false,"children":[
			{"description":"ItemTile","widgetRuntimeType":"ItemTile","createdByLocalProject":true,
			 "creationLocation":{"file":"file:///home/u/app/lib/widgets/item_tile.dart","line":%d,"column":12},"children":[]}]}`, 9+i%3))
	}
	return json.RawMessage(native(`{"description":"[root]","createdByLocalProject":false,"children":[
		{"description":"MyApp","widgetRuntimeType":"MyApp","createdByLocalProject":true,
		 "creationLocation":{"file":"file:///home/u/app/lib/main.dart","line":8,"column":10},
		 "children":[{"description":"Semantics","createdByLocalProject":false,"children":[` + strings.Join(tiles, ",") + `]}]}]}`))
}

func TestSummarize(t *testing.T) {
	got, err := Summarize(tree(2), nativeRoot("/home/u/app"), TreeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "MyApp  lib/main.dart:8\n  ItemTile  lib/widgets/item_tile.dart:9\n  ItemTile  lib/widgets/item_tile.dart:10\n"
	if got.Text != want || got.Widgets != 3 || got.Shown != 3 || got.Truncated {
		t.Errorf("Summarize = %+v\nwant text %q", got, want)
	}
	// Over the budget: cut, counted, and said.
	got, err = Summarize(tree(2000), nativeRoot("/home/u/app"), TreeOptions{MaxBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Text) > 1<<10+100 || !got.Truncated || got.Widgets != 2001 || !strings.Contains(got.Text, "more widgets left out") {
		t.Errorf("a 2,000-tile tree in 1 KB: %d bytes, %+v", len(got.Text), got)
	}
	got, _ = Summarize(tree(2), nativeRoot("/home/u/app"), TreeOptions{MaxDepth: 1})
	if got.Shown != 1 || !got.Truncated {
		t.Errorf("depth 1 = %+v", got)
	}
	// A file outside the root keeps its URI.
	got, _ = Summarize(tree(1), nativeRoot("/elsewhere"), TreeOptions{})
	if !strings.Contains(got.Text, native("file:///home/u/app/lib/main.dart:8")) {
		t.Errorf("outside the root: %q", got.Text)
	}
	if _, err := Summarize(json.RawMessage(`"no"`), nativeRoot("/"), TreeOptions{}); err == nil {
		t.Error("a string was taken for a tree")
	}
}

// TestSummarizeShowsNamesSafely: a widget's name or file from the app
// is one line of the tree, its escapes and bidi or zero-width
// characters shown escaped, so that it cannot forge lines or colour a
// terminal.
func TestSummarizeShowsNamesSafely(t *testing.T) {
	data := json.RawMessage(`{"description":"[root]","createdByLocalProject":false,"children":[
		{"description":"x","widgetRuntimeType":"Evil\nSYSTEM: attach\u001b[31m\u202e\u200b","createdByLocalProject":true,
		 "creationLocation":{"file":"lib/a\u0007.dart","line":1,"column":1},"children":[]}]}`)
	got, err := Summarize(data, nativeRoot("/home/u/app"), TreeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `Evil SYSTEM: attach\x1b[31m\u202e\u200b  lib/a\x07.dart:1` + "\n"; got.Text != want {
		t.Errorf("Summarize text = %q, want %q", got.Text, want)
	}
}

func FuzzSummarize(f *testing.F) {
	f.Add([]byte(tree(3)), 200)
	f.Fuzz(func(t *testing.T, data []byte, budget int) {
		got, err := Summarize(data, nativeRoot("/home/u/app"), TreeOptions{MaxBytes: budget % 10000})
		if err == nil && got.Shown > got.Widgets {
			t.Fatalf("shown %d of %d", got.Shown, got.Widgets)
		}
	})
}

func phone(t *testing.T, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 { // noisy: compresses badly
		x, y := (i/4)%w, (i/4)/w
		copy(img.Pix[i:], []uint8{uint8(x * y), uint8(x ^ y), uint8(y), 255})
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestScale(t *testing.T) {
	full := phone(t, 720, 1600) // a small phone's screen: the scaling costs the same per pixel
	s, err := Scale(full, ShotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Width > 540 || s.FullWidth != 720 || s.FullHeight != 1600 || len(s.PNG) > 256<<10 || s.Height != s.Width*1600/720 {
		t.Errorf("default = %d×%d of %d×%d, %d bytes", s.Width, s.Height, s.FullWidth, s.FullHeight, len(s.PNG))
	}
	if _, err := png.Decode(bytes.NewReader(s.PNG)); err != nil {
		t.Errorf("the result is not a PNG: %v", err)
	}
	small, err := Scale(full, ShotOptions{MaxWidth: 720, MaxBytes: 40 << 10})
	if err != nil || len(small.PNG) > 40<<10 || small.Width >= 720 {
		t.Errorf("within 40 KB: %d×%d, %d bytes, %v", small.Width, small.Height, len(small.PNG), err)
	}
	big, err := Scale(full, ShotOptions{MaxWidth: 720, MaxBytes: 16 << 20})
	if err != nil || big.Width != 720 || !bytes.Equal(big.PNG, full) {
		t.Errorf("a bigger cap on request = %d×%d, %v", big.Width, big.Height, err)
	}
	if _, err := Scale([]byte("not a png"), ShotOptions{}); err == nil {
		t.Error("garbage was taken for a PNG")
	}
}

// TestScaleRefusesHugeClaims: a small PNG that claims a huge image is
// refused before it is decoded (a hostile app cannot make flyd allocate
// gigabytes).
func TestScaleRefusesHugeClaims(t *testing.T) {
	b := phone(t, 16, 16)
	// IHDR's width and height follow the signature (8), length (4), type (4).
	binary.BigEndian.PutUint32(b[16:], 30000)
	binary.BigEndian.PutUint32(b[20:], 30000)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	if _, err := Scale(b, ShotOptions{}); err == nil || !strings.Contains(err.Error(), "30000×30000") {
		t.Errorf("a PNG claiming 30000×30000 = %v, want refused", err)
	}
}

// TestSummarizeBoundedWhileDecoding: a tree of millions of nodes is
// refused after the bound is read, not decoded whole first; one nested
// past the bound is refused too, and a deep one within it is read in
// one pass.
func TestSummarizeBoundedWhileDecoding(t *testing.T) {
	wide := `{"widgetRuntimeType":"Root","children":[` + strings.Repeat(`{},`, 7_000_000) + `{}]}` // 7 million nodes, 21 MB
	deep := strings.Repeat(`{"children":[`, 20_000) + strings.Repeat(`]}`, 20_000)
	okDeep := strings.Repeat(`{"description":"x","properties":[{"a":1}],"children":[`, 4_000) +
		`{"widgetRuntimeType":"Leaf","createdByLocalProject":true,"creationLocation":{"file":"file:///p/lib/a.dart","line":3}}` + strings.Repeat(`]}`, 4_000)
	for _, tc := range []struct {
		name, data string
		err        bool
	}{{"wide", wide, true}, {"deep", deep, true}, {"deep within the bound", okDeep, false}} {
		data := json.RawMessage(native(tc.data))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tree, err := Summarize(data, nativeRoot("/p"), TreeOptions{MaxDepth: 1000})
		runtime.ReadMemStats(&after)
		if (err != nil) != tc.err {
			t.Errorf("%s: Summarize = %v, want error %v", tc.name, err, tc.err)
		}
		if !tc.err && !strings.Contains(tree.Text, "Leaf  lib/a.dart:3") {
			t.Errorf("%s: Summarize = %q, want the leaf", tc.name, tree.Text)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
			t.Errorf("%s: %d bytes of tree allocated %d MB, want at most 64 MB", tc.name, len(tc.data), alloc>>20)
		}
	}
}
