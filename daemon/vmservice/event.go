package vmservice

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// Event is one event of a stream (reference §1.4, §1.5), with the fields
// fly reads. Strings are cut to maxField bytes; ExtensionData is the raw
// JSON the app posted and Text what it wrote, both within the
// connection's MaxEventData.
type Event struct {
	StreamID      string
	Kind          string          // IsolateStart, Extension, WriteEvent, ServiceRegistered, …
	Isolate       IsolateRef      // zero for VM-level events
	Timestamp     int64           // ms since the epoch, as the VM stamps it
	ExtensionKind string          // Flutter.Error, Flutter.Frame, … (Extension events)
	ExtensionData json.RawMessage // also a DTD event's eventData
	Text          string          // the decoded bytes of a Stdout or Stderr WriteEvent
	TextCut       bool            // Text is the start of what was written: the rest was over MaxEventData
	Service       string          // ServiceRegistered and ServiceUnregistered: reloadSources, hotRestart, …
	Method        string          // the namespaced method to call it by: s0.reloadSources
	Alias         string
	Extension     string // ServiceExtensionAdded: the extension's method, ext.flutter.…
}

// IsolateRef names an isolate.
type IsolateRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// maxField bounds every string an event carries but its data and text.
const maxField = 256

type wireEvent struct {
	Kind          string          `json:"kind"`
	Isolate       *IsolateRef     `json:"isolate"`
	Timestamp     int64           `json:"timestamp"`
	ExtensionKind string          `json:"extensionKind"`
	ExtensionData json.RawMessage `json:"extensionData"`
	Bytes         string          `json:"bytes"`
	Service       string          `json:"service"`
	Method        string          `json:"method"`
	Alias         string          `json:"alias"`
	ExtensionRPC  string          `json:"extensionRPC"`
}

// errTooLarge refuses an event whose data is over MaxEventData.
var errTooLarge = errors.New("event data too large")

func decodeEvent(stream string, raw json.RawMessage, maxData int) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		return Event{}, err
	}
	if len(w.ExtensionData) > maxData {
		return Event{}, errTooLarge
	}
	return w.event(stream, maxData), nil
}

// size is what an event costs the queue: its data and text, and a
// little for the rest.
func (e *Event) size() int64 { return int64(len(e.ExtensionData) + len(e.Text) + 256) }

// event is the Event of w on stream, its fields bounded; its text is cut
// to maxText bytes.
func (w *wireEvent) event(stream string, maxText int) Event {
	e := Event{
		StreamID: bound(stream), Kind: bound(w.Kind), Timestamp: w.Timestamp,
		ExtensionKind: bound(w.ExtensionKind), ExtensionData: w.ExtensionData,
		Service: bound(w.Service), Method: bound(w.Method), Alias: bound(w.Alias), Extension: bound(w.ExtensionRPC),
	}
	if w.Isolate != nil {
		e.Isolate = IsolateRef{ID: bound(w.Isolate.ID), Name: bound(w.Isolate.Name)}
	}
	if w.Bytes != "" {
		b64 := w.Bytes
		if n := base64.StdEncoding.EncodedLen(maxText); len(b64) > n { // decode no more than is kept
			b64, e.TextCut = b64[:n], true
		}
		if b, err := base64.StdEncoding.DecodeString(b64); err == nil {
			e.Text = strings.ToValidUTF8(string(b), "\uFFFD")
		}
	}
	return e
}

// bound cuts s to maxField bytes on a rune boundary, invalid UTF-8
// replaced.
func bound(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxField {
		return s
	}
	i := maxField
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
