package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTrimEOL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"\n", ""},
		{"\r\n", ""},
		{"{}", "{}"},
		{"{}\n", "{}"},
		{"{}\r\n", "{}"},
		{"{}\r", "{}\r"},
		{"{}\n\n", "{}\n"},
		{"{}\r\r\n", "{}\r"},
	}
	for _, tt := range tests {
		if got := string(trimEOL([]byte(tt.in))); got != tt.want {
			t.Errorf("trimEOL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		in      string
		kinds   []kind
		batch   bool
		wantErr bool
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, kinds: []kind{kindRequest}},
		{in: `  {"method":"tools/list","id":"a"}  `, kinds: []kind{kindRequest}},
		{in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, kinds: []kind{kindNotification}},
		{in: `{"jsonrpc":"2.0","id":null,"method":"x"}`, kinds: []kind{kindNotification}},
		{in: `{"jsonrpc":"2.0","id":3,"result":{}}`, kinds: []kind{kindResponse}},
		{in: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, kinds: []kind{kindResponse}},
		{in: `{"jsonrpc":"2.0","id":3,"method":null,"result":{}}`, kinds: []kind{kindResponse}},
		{in: `{}`, kinds: []kind{kindOther}},
		{in: `[{"id":1,"method":"a"},{"method":"b"},{"id":2,"result":1},7]`, batch: true,
			kinds: []kind{kindRequest, kindNotification, kindResponse, kindOther}},
		{in: `[]`, batch: true},
		{in: `42`},
		{in: `"str"`},
		{in: `null`},
		{in: `nope`, wantErr: true},
		{in: `{"id":1,"method":"a"`, wantErr: true},
		{in: `{"id":1} {}`, wantErr: true},
		{in: `[1,]`, wantErr: true},
	}
	for _, tt := range tests {
		msgs, batch, err := classify([]byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("classify(%s) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		var kinds []kind
		for _, m := range msgs {
			kinds = append(kinds, m.kind())
		}
		if batch != tt.batch || !equalKinds(kinds, tt.kinds) {
			t.Errorf("classify(%s) = %v, batch %v, want %v, batch %v", tt.in, kinds, batch, tt.kinds, tt.batch)
		}
	}
}

func equalKinds(a, b []kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestIDKey(t *testing.T) {
	same := [][2]string{
		{`1`, `1.0`},
		{`1`, `1e0`},
		{`-0`, `0`},
		{`"a"`, `"\u0061"`},
		{`"é"`, `"\u00e9"`},
		{`{"a": 1}`, `{"a":1}`},
	}
	for _, p := range same {
		if a, b := idKey(json.RawMessage(p[0])), idKey(json.RawMessage(p[1])); a != b {
			t.Errorf("idKey(%s) = %q, idKey(%s) = %q, want equal", p[0], a, p[1], b)
		}
	}
	differ := [][2]string{{`1`, `"1"`}, {`1`, `2`}, {`"a"`, `"b"`}, {`1.5`, `1`}, {`null`, `"null"`}}
	for _, p := range differ {
		if a, b := idKey(json.RawMessage(p[0])), idKey(json.RawMessage(p[1])); a == b {
			t.Errorf("idKey(%s) = idKey(%s) = %q, want different", p[0], p[1], a)
		}
	}
}

func TestErrorBuilders(t *testing.T) {
	got := string(parseErrorReply("invalid character 'x'"))
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: invalid character 'x'"}}`
	if got != want {
		t.Errorf("parseErrorReply = %s, want %s", got, want)
	}
	got = string(errorReply(json.RawMessage(`"abc"`), codeInternalError, "flyd connection lost: x"))
	want = `{"jsonrpc":"2.0","id":"abc","error":{"code":-32603,"message":"flyd connection lost: x"}}`
	if got != want {
		t.Errorf("errorReply = %s, want %s", got, want)
	}

	msgs, batch, _ := classify([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`))
	got = string(tooBigReply(msgs, batch, 2000, 1000))
	want = `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"message of 2000 bytes exceeds flyd's limit of 1000 bytes (flyd --max-message-mb)"}}`
	if got != want {
		t.Errorf("tooBigReply(request) = %s, want %s", got, want)
	}
	msgs, batch, _ = classify([]byte(`[{"id":1,"method":"a"},{"method":"n"},{"id":"x","method":"b"}]`))
	got = string(tooBigReply(msgs, batch, 2000, 1000))
	var replies []rpcError
	if err := json.Unmarshal([]byte(got), &replies); err != nil || len(replies) != 2 ||
		string(replies[0].ID) != "1" || string(replies[1].ID) != `"x"` {
		t.Errorf("tooBigReply(batch) = %s, want a batch of errors for ids 1 and \"x\"", got)
	}
	msgs, batch, _ = classify([]byte(`{"jsonrpc":"2.0","method":"notifications/x"}`))
	if got := tooBigReply(msgs, batch, 2000, 1000); got != nil {
		t.Errorf("tooBigReply(notification) = %s, want nil", got)
	}
}

func TestInbound(t *testing.T) {
	var buf, scratch bytes.Buffer
	tests := []struct{ in, want string }{
		{`{"id":1,"result":{}}`, `{"id":1,"result":{}}`},
		{"{\n  \"id\": 1,\n  \"result\": {\"a\": [1, 2]}\n}", `{"id":1,"result":{"a":[1,2]}}`},
		{"{\"id\":1,\r\n\"result\":\"a b\"}", `{"id":1,"result":"a b"}`},
		{`[{"id":1,"result":{}},{"id":2,"result":{}}]`, `[{"id":1,"result":{}},{"id":2,"result":{}}]`},
	}
	for _, tt := range tests {
		buf.Reset()
		buf.WriteString(tt.in)
		got, msgs, _, err := inbound(&buf, &scratch)
		if err != nil || got.String() != tt.want || len(msgs) == 0 || msgs[0].kind() != kindResponse {
			t.Errorf("inbound(%q) = %v, %v, want %s", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"not json", "{\n", "[1,"} {
		buf.Reset()
		buf.WriteString(in)
		if got, _, _, err := inbound(&buf, &scratch); err == nil {
			t.Errorf("inbound(%q) = %s, want an error", in, got)
		}
	}
}

func TestScan(t *testing.T) {
	tests := []struct {
		in, id string
		k      kind
		ok     bool
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"contents":[{"text":"}\"{"}]}}`, "7", kindResponse, true},
		{`{"jsonrpc":"2.0","id":"a\"b","error":{"code":1}}`, `"a\"b"`, kindResponse, true},
		{`{"jsonrpc":"2.0","id":3,"method":"roots/list","params":{}}`, "3", kindRequest, true},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"a":[1,{"b":"\\"}]}}`, "", kindNotification, true},
		{` { "result" : [1, 2], "id" : 9 } `, "9", kindResponse, true},
		{`{"params":{},"method":"x","id":null}`, "null", kindNotification, true},
		{`{}`, "", kindOther, true},
		{`{"ID":1,"result":1}`, "", kindOther, false},
		{`{"i\u0064":1,"result":1}`, "", kindOther, false},
		{`[{"id":1,"result":1}]`, "", kindOther, false},
		{`{"id":1,"result"`, "", kindOther, false},
		{`{"method":"x","params":{"a":1}`, "", kindOther, false},
		{`"str"`, "", kindOther, false},
	}
	for _, tt := range tests {
		e, ok := scan([]byte(tt.in))
		if ok != tt.ok || ok && (string(e.ID) != tt.id || e.kind() != tt.k) {
			t.Errorf("scan(%s) = id %s, %v, %v; want id %s, %v, %v", tt.in, e.ID, e.kind(), ok, tt.id, tt.k, tt.ok)
		}
	}
}

// FuzzScan checks that scan agrees with classify on every valid JSON
// object it can be asked about: unique top-level keys, spelled plainly,
// and not both a request and a response.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"a":"b"}}`,
		`{"jsonrpc":"2.0","method":"m","params":{"x":[1,"]}"]}}`,
		`{"result":1,"id":"x"}`, `{"id":1,"method":"a"}`, `{"id":[1],"error":{}}`,
		`{"a":"\\","id":2,"result":null}`, `{"a":-1.5e3,"id":true,"result":false}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, ok := scan(data)
		if !json.Valid(data) || firstByte(data) != '{' {
			return
		}
		keys, plain := topKeys(data)
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[strings.ToLower(k)] {
				return // a duplicate: encoding/json takes the last
			}
			seen[strings.ToLower(k)] = true
		}
		if seen["method"] && (seen["result"] || seen["error"]) {
			return
		}
		if !ok {
			if plain {
				t.Fatalf("scan(%q) failed on a valid object with plain keys", data)
			}
			return
		}
		msgs, _, err := classify(data)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("classify(%q) = %v, %v", data, msgs, err)
		}
		if e.kind() != msgs[0].kind() || len(e.ID) > 0 && idKey(e.ID) != idKey(msgs[0].ID) {
			t.Fatalf("scan(%q) = %v id %s; classify: %v id %s", data, e.kind(), e.ID, msgs[0].kind(), msgs[0].ID)
		}
	})
}

// topKeys returns the top-level keys of a valid JSON object, decoded, and
// whether each was spelled as scan reads it: without escapes, and not a
// case variant of a member scan reads.
func topKeys(obj []byte) (keys []string, plain bool) {
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	plain = true
	depth := 0
	wantKey := false
	for {
		tok, err := d.Token()
		if err != nil {
			return keys, plain
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				depth++
				wantKey = depth == 1 // the object itself
			case '}', ']':
				depth--
				wantKey = depth == 1 // after a member's value
			}
			continue
		case string:
			if depth == 1 && wantKey {
				keys = append(keys, v)
				if caseVariant([]byte(v)) || !bytes.Contains(obj, []byte(`"`+v+`"`)) || strings.ContainsAny(v, "\\\"") {
					plain = false
				}
				wantKey = false
				continue
			}
		}
		if depth == 1 {
			wantKey = true
		}
	}
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // several times the bufio buffer
	in := "a\n\r\n" + long + "\r\nlast"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	var got []string
	for {
		b, err := readLine(br, nil)
		if s := string(trimEOL(b)); s != "" || err == nil {
			got = append(got, s)
		}
		if err != nil {
			break
		}
	}
	want := []string{"a", "", long, "last"}
	if len(got) != len(want) {
		t.Fatalf("readLine read %d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %.20q (%d bytes), want %.20q (%d bytes)", i, got[i], len(got[i]), want[i], len(want[i]))
		}
	}
}

// FuzzLine checks the invariants of the pure line logic on any input.
func FuzzLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\r\n",
		`{"jsonrpc":"2.0","id":"x","result":{"a":"b\nc"}}`,
		`[{"id":1,"method":"a"},{"method":"b"},{"id":2,"result":1},7]`,
		`{"id":1.0e0,"method":"a"}`,
		`{"ID":1,"method":"a"}`,
		`{"id":1,"id":null,"method":"a"}`,
		`{"id":"\u00e9\ud800","method":"a"}`,
		"{\"id\":\"\xff\",\"method\":\"a\"}",
		"{\n\"id\": 5,\n\"result\": null\n}",
		`not json`, `{`, `[`, `"`, ``, "\n", "   ", `[]`, `null`, `-0`, `1e999`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Framing: trimEOL removes at most one "\n" and the "\r" before it.
		line := trimEOL(data)
		if !bytes.HasPrefix(data, line) {
			t.Fatalf("trimEOL(%q) = %q, not a prefix", data, line)
		}
		switch cut := string(data[len(line):]); cut {
		case "", "\n", "\r\n":
		default:
			t.Fatalf("trimEOL(%q) cut %q", data, cut)
		}
		if bytes.HasSuffix(data, []byte("\n")) == (len(line) == len(data)) {
			t.Fatalf("trimEOL(%q) = %q", data, line)
		}

		msgs, batch, err := classify(line)
		if valid := json.Valid(line); valid != (err == nil) {
			t.Fatalf("classify(%q) error = %v, but json.Valid = %v", line, err, valid)
		}
		if err != nil {
			checkReply(t, parseErrorReply(err.Error()), "null")
			return
		}

		// Classification depends on the value, not its formatting.
		var compact bytes.Buffer
		if err := json.Compact(&compact, line); err != nil {
			t.Fatalf("json.Compact(%q): %v", line, err)
		}
		msgs2, batch2, err := classify(compact.Bytes())
		if err != nil || batch2 != batch || len(msgs2) != len(msgs) {
			t.Fatalf("classify(%q) = %d msgs, batch %v; compacted: %d msgs, batch %v, %v", line, len(msgs), batch, len(msgs2), batch2, err)
		}
		switch first := firstByte(line); {
		case first == '{' && (len(msgs) != 1 || batch):
			t.Fatalf("classify(%q) = %d msgs, batch %v, want one object", line, len(msgs), batch)
		case first == '[' && !batch:
			t.Fatalf("classify(%q): not a batch", line)
		case first != '{' && first != '[' && (len(msgs) != 0 || batch):
			t.Fatalf("classify(%q) = %d msgs, want none", line, len(msgs))
		}
		if batch {
			var elems []json.RawMessage
			if err := json.Unmarshal(line, &elems); err != nil || len(elems) != len(msgs) {
				t.Fatalf("classify(%q) = %d msgs, want %d (%v)", line, len(msgs), len(elems), err)
			}
		}
		for i, m := range msgs {
			k := m.kind()
			if k2 := msgs2[i].kind(); k2 != k || (k != kindOther && idKey(m.ID) != idKey(msgs2[i].ID)) {
				t.Fatalf("message %d of %q is a %v, compacted a %v", i, line, k, k2)
			}
			if k != kindRequest {
				continue
			}
			// The shim's own reply to a request answers exactly it.
			reply := errorReply(m.ID, codeInternalError, "flyd connection lost: "+string(data))
			rmsgs := checkReply(t, reply, "")
			if idKey(rmsgs[0].ID) != idKey(m.ID) {
				t.Fatalf("errorReply(%s) has id %s: key %q, want %q", m.ID, rmsgs[0].ID, idKey(rmsgs[0].ID), idKey(m.ID))
			}
		}
		size := int64(len(line))
		if reply := tooBigReply(msgs, batch, size, size-1); reply != nil {
			if !json.Valid(reply) || bytes.ContainsAny(reply, "\r\n") {
				t.Fatalf("tooBigReply(%q) = %q: not one line of JSON", line, reply)
			}
			if len(requestIDs(msgs)) == 0 {
				t.Fatalf("tooBigReply(%q) answered no request", line)
			}
		} else if len(requestIDs(msgs)) != 0 {
			t.Fatalf("tooBigReply(%q) = nil, but it holds requests", line)
		}

		// A message from flyd: written as one line of the same JSON.
		var in, scratch bytes.Buffer
		in.Write(data)
		out, _, _, err := inbound(&in, &scratch)
		if err == nil && bytes.IndexByte(out.Bytes(), '\n') >= 0 {
			t.Fatalf("inbound(%q) = %q: not one line", data, out)
		}
		if err == nil && json.Valid(data) {
			var c1, c2 bytes.Buffer
			json.Compact(&c1, data)
			json.Compact(&c2, out.Bytes())
			if c1.String() != c2.String() {
				t.Fatalf("inbound(%q) = %q", data, out)
			}
		}
		if err != nil && json.Valid(data) {
			t.Fatalf("inbound(%q) error = %v on valid JSON", data, err)
		}

		// Any text fits in an error message.
		checkReply(t, parseErrorReply(string(data)), "null")
		if r := truncate(string(data), 10); utf8.ValidString(string(data)) && !utf8.ValidString(r) {
			t.Fatalf("truncate(%q, 10) = %q: split a rune", data, r)
		}
	})
}

// checkReply checks that reply is one line of valid JSON that classifies
// as a single response (with id wantID, unless empty), and returns it.
func checkReply(t *testing.T, reply []byte, wantID string) []envelope {
	t.Helper()
	if !json.Valid(reply) || bytes.ContainsAny(reply, "\r\n") {
		t.Fatalf("reply %q: not one line of JSON", reply)
	}
	msgs, batch, err := classify(reply)
	if err != nil || batch || len(msgs) != 1 || msgs[0].kind() != kindResponse {
		t.Fatalf("reply %q does not classify as one response", reply)
	}
	if wantID != "" && string(msgs[0].ID) != wantID {
		t.Fatalf("reply %q has id %s, want %s", reply, msgs[0].ID, wantID)
	}
	return msgs
}
