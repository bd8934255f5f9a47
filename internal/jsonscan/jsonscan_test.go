package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestElementsAndMembers(t *testing.T) {
	deep := strings.Repeat("[", 50000) + strings.Repeat("]", 50000)
	arr := `[ {"a":"]},"} , ` + deep + `,3, "x" ,null]`
	got := Elements([]byte(arr), 10)
	want := []string{`{"a":"]},"}`, deep, `3`, `"x"`, `null`}
	if len(got) != len(want) {
		t.Fatalf("Elements(%.40s) = %d elements, want %d", arr, len(got), len(want))
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("Elements(...)[%d] = %.40q, want %.40q", i, got[i], want[i])
		}
	}
	if got := Elements([]byte(arr), 2); len(got) != 2 {
		t.Errorf("Elements(..., 2) = %d elements, want 2", len(got))
	}
	var keys []string
	ok := Members([]byte(`{"id":"1", "result" : `+deep+` ,"n":-1.5e3}`), func(k, v []byte) bool {
		keys = append(keys, string(k)+"="+string(v[:min(len(v), 3)]))
		return true
	})
	if !ok || strings.Join(keys, " ") != `"id"="1" "result"=[[[ "n"=-1.` {
		t.Errorf("Members = %v, %v", keys, ok)
	}
	for _, bad := range []string{``, `[`, `{"a"`, `{"a":`, `{"a":"`, `{"a" 1}`, `"x"`, `{,}`} {
		Members([]byte(bad), func(k, v []byte) bool { return true })
		Elements([]byte(bad), 5)
	}
}

// FuzzValue: on any JSON encoding/json accepts, Value spans it whole,
// and Elements and Members find what encoding/json finds.
func FuzzValue(f *testing.F) {
	f.Add(`{"a":[1,"]",{"b":null}],"c":"\"}"}`)
	f.Add(`[1, 2 ,"x"]`)
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		Members(b, func(k, v []byte) bool { return true }) // no panic on anything
		Elements(b, 100)
		if !json.Valid(b) {
			return
		}
		i := Space(b, 0)
		if end := Value(b, i); end < 0 || Space(b, end) != len(b) {
			t.Fatalf("Value(%q) = %d, want the whole value", s, end)
		}
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) == nil && len(arr) <= 100 {
			got := Elements(b, 100)
			if len(got) != len(arr) {
				t.Fatalf("Elements(%q) = %d elements, want %d", s, len(got), len(arr))
			}
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(b, &obj) == nil && obj != nil {
			n := 0
			if !Members(b, func(k, v []byte) bool { n++; return true }) || n < len(obj) {
				t.Fatalf("Members(%q) found %d members, want at least %d", s, n, len(obj))
			}
		}
	})
}
