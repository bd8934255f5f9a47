package mcpconn

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FuzzEncodeMessage checks that the spliced encoding of a response is the
// SDK's own, byte for byte, for any id and any result the SDK could have
// encoded.
func FuzzEncodeMessage(f *testing.F) {
	f.Add(int64(1), "", true, `{"contents":[{"uri":"workspace:///a","text":"x\n\"y\""}]}`)
	f.Add(int64(-7), "<a&b>\u2028", false, `{}`)
	f.Add(int64(0), "", false, `[1,"é",null]`)
	f.Fuzz(func(t *testing.T, n int64, s string, numeric bool, result string) {
		var v any = s
		if numeric {
			v = n
		}
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			return
		}
		var decoded any
		if json.Unmarshal([]byte(result), &decoded) != nil {
			return
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as the SDK encodes a result
		if enc.Encode(decoded) != nil {
			return
		}
		raw := json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		for _, msg := range []jsonrpc.Message{
			&jsonrpc.Response{ID: id, Result: raw},
			&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: 1, Message: s}},
			&jsonrpc.Request{ID: id, Method: "m", Params: raw},
		} {
			want, err1 := jsonrpc.EncodeMessage(msg)
			got, err2 := encodeMessage(msg)
			if (err1 == nil) != (err2 == nil) || !bytes.Equal(got, want) {
				t.Fatalf("encodeMessage(%#v) = %s, %v; the SDK: %s, %v", msg, got, err2, want, err1)
			}
		}
	})
}

// TestStashBounded: texts stashed for responses that are never written
// stop being stashed past spliceMax, and a stashed text comes back once.
func TestStashBounded(t *testing.T) {
	w := &WebSocket{}
	text := strings.Repeat("x", 1<<20)
	var phs []string
	for range spliceMax/(1<<20) + 8 {
		phs = append(phs, w.Stash(text))
	}
	if last := phs[len(phs)-1]; last != text {
		t.Errorf("stash past %d bytes returned a placeholder", spliceMax)
	}
	if first := phs[0]; first == text || !strings.HasPrefix(first, "\x00fly-splice:") {
		t.Fatalf("first stash = %.40q, want a placeholder", first)
	}
	if w.Stash("small") != "small" {
		t.Error("a small text was stashed")
	}
	data, _ := json.Marshal(map[string]string{"text": phs[0]})
	out := w.splice(data)
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil || got["text"] != text {
		t.Fatalf("spliced response does not hold the text: %v", err)
	}
	if again := w.splice(data); !bytes.Equal(again, data) {
		t.Error("a stashed text was spliced twice")
	}
}
