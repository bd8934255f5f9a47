package vmservice

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Event is one event of a stream (reference §1.4, §1.5), with the fields
// fly reads. Strings are cut to maxField bytes; ExtensionData is the raw
// JSON the app posted, bounded by the message size.
type Event struct {
	StreamID      string
	Kind          string          // IsolateStart, Extension, WriteEvent, ServiceRegistered, …
	Isolate       IsolateRef      // zero for VM-level events
	Timestamp     int64           // ms since the epoch, as the VM stamps it
	ExtensionKind string          // Flutter.Error, Flutter.Frame, … (Extension events)
	ExtensionData json.RawMessage // also a DTD event's eventData
	Text          string          // the decoded bytes of a Stdout or Stderr WriteEvent
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

func decodeEvent(stream string, raw json.RawMessage) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		return Event{}, err
	}
	return w.event(stream), nil
}

// event is the Event of w on stream, its fields bounded.
func (w *wireEvent) event(stream string) Event {
	e := Event{
		StreamID: bound(stream), Kind: bound(w.Kind), Timestamp: w.Timestamp,
		ExtensionKind: bound(w.ExtensionKind), ExtensionData: w.ExtensionData,
		Service: bound(w.Service), Method: bound(w.Method), Alias: bound(w.Alias), Extension: bound(w.ExtensionRPC),
	}
	if w.Isolate != nil {
		e.Isolate = IsolateRef{ID: bound(w.Isolate.ID), Name: bound(w.Isolate.Name)}
	}
	if w.Bytes != "" {
		if b, err := base64.StdEncoding.DecodeString(w.Bytes); err == nil {
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
