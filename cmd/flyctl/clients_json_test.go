package main

import (
	"encoding/json"
	"strings"
	"testing"
)

var flyEntry = serverEntry{Command: "/opt/fly/flyctl", Args: []string{"mcp"}}

func TestJSONDocSet(t *testing.T) {
	tests := []struct {
		name, key, in, want string
	}{
		{"empty file", "mcpServers", "",
			"{\n  \"mcpServers\": {\n    \"fly\": {\n      \"command\": \"/opt/fly/flyctl\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  }\n}\n"},
		{"no servers", "mcpServers", "{\n  \"theme\": \"dark\"\n}\n",
			"{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"fly\": {\n      \"command\": \"/opt/fly/flyctl\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  }\n}\n"},
		{"null servers", "mcpServers", "{\"mcpServers\": null}",
			"{\"mcpServers\": {\n  \"fly\": {\n    \"command\": \"/opt/fly/flyctl\",\n    \"args\": [\n      \"mcp\"\n    ]\n  }\n}}"},
		{"empty servers", "servers", "{\n\t\"servers\": {}\n}",
			"{\n\t\"servers\": {\n\t\t\"fly\": {\n\t\t\t\"command\": \"/opt/fly/flyctl\",\n\t\t\t\"args\": [\n\t\t\t\t\"mcp\"\n\t\t\t]\n\t\t}\n\t}\n}"},
		{"compact", "mcpServers", `{"mcpServers":{"a":{"command":"x"}},"z":1}`,
			`{"mcpServers":{"a":{"command":"x"}, "fly": {"command":"/opt/fly/flyctl","args":["mcp"]}},"z":1}`},
		{"after others", "mcpServers", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n  }\n}\n",
			"{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"},\n    \"fly\": {\n      \"command\": \"/opt/fly/flyctl\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  }\n}\n"},
		{"replace in place", "mcpServers", "{\n  \"mcpServers\": {\n    \"fly\": {\"command\": \"old\"}, // old one\n    \"b\": {\"command\": \"y\"}\n  }\n}\n",
			"{\n  \"mcpServers\": {\n    \"fly\": {\n      \"command\": \"/opt/fly/flyctl\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }, // old one\n    \"b\": {\"command\": \"y\"}\n  }\n}\n"},
		{"comment after the last", "servers", "{\n  \"servers\": {\n    \"a\": {} // mine\n  },\n}\n",
			"{\n  \"servers\": {\n    \"a\": {}, // mine\n    \"fly\": {\n      \"command\": \"/opt/fly/flyctl\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  },\n}\n"},
		{"trailing comma", "servers", "{\n  \"servers\": {\n    \"a\": {},\n  }\n}\n",
			"{\n  \"servers\": {\n    \"a\": {},\n    \"fly\": {\n      \"command\": \"/opt/fly/flyctl\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  }\n}\n"},
		{"crlf", "mcpServers", "{\r\n  \"mcpServers\": {\r\n    \"a\": {}\r\n  }\r\n}\r\n",
			"{\r\n  \"mcpServers\": {\r\n    \"a\": {},\r\n    \"fly\": {\r\n      \"command\": \"/opt/fly/flyctl\",\r\n      \"args\": [\r\n        \"mcp\"\r\n      ]\r\n    }\r\n  }\r\n}\r\n"},
		{"strings with slashes and braces", "mcpServers", "{\"url\": \"http://x/*\", \"mcpServers\": {\"a\": {\"args\": [\"}//\"]}}}",
			"{\"url\": \"http://x/*\", \"mcpServers\": {\"a\": {\"args\": [\"}//\"]}, \"fly\": {\"command\":\"/opt/fly/flyctl\",\"args\":[\"mcp\"]}}}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := parseJSONDoc([]byte(tt.in), tt.key)
			if err != nil {
				t.Fatalf("parseJSONDoc(%q) = %v", tt.in, err)
			}
			got, err := d.set("fly", flyEntry)
			if err != nil {
				t.Fatalf("set = %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("set(%q) =\n%q\nwant\n%q", tt.in, got, tt.want)
			}
			// The result reads back with fly, and, removed again, is
			// the input (where the input had other servers).
			d2, err := parseJSONDoc(got, tt.key)
			if err != nil {
				t.Fatalf("the result does not parse: %v\n%s", err, got)
			}
			_, raw := d2.entries()
			var e serverEntry
			if err := json.Unmarshal(raw["fly"], &e); err != nil || e.Command != flyEntry.Command {
				t.Errorf("the result's fly = %s (%v)", raw["fly"], err)
			}
		})
	}
}

func TestJSONDocRemove(t *testing.T) {
	tests := []struct {
		name, in, want string
		found          bool
	}{
		{"only", "{\n  \"mcpServers\": {\n    \"fly\": {\"command\": \"f\"}\n  }\n}\n", "{\n  \"mcpServers\": {}\n}\n", true},
		{"first", "{\"mcpServers\": {\"fly\": {}, \"b\": 1}}", "{\"mcpServers\": {\"b\": 1}}", true},
		{"middle", "{\n  \"mcpServers\": {\n    \"a\": 1,\n    \"fly\": {\n      \"x\": [1]\n    },\n    \"b\": 2\n  }\n}", "{\n  \"mcpServers\": {\n    \"a\": 1,\n    \"b\": 2\n  }\n}", true},
		{"last, a comment before it kept", "{\n  \"mcpServers\": {\n    \"a\": 1, // mine\n    \"fly\": {}\n  }\n}", "{\n  \"mcpServers\": {\n    \"a\": 1 // mine\n  }\n}", true},
		{"last, compact", "{\"mcpServers\":{\"a\":1,\"fly\":{}}}", "{\"mcpServers\":{\"a\":1}}", true},
		{"last with a trailing comma", "{\n  \"servers\": {\n    \"a\": 1,\n    \"fly\": {},\n  }\n}", "{\n  \"servers\": {\n    \"a\": 1\n  }\n}", true},
		{"twice", "{\"mcpServers\": {\"fly\": 1, \"a\": 2, \"fly\": 3}}", "{\"mcpServers\": {\"a\": 2}}", true},
		{"none", "{\"mcpServers\": {\"a\": 1}}", "{\"mcpServers\": {\"a\": 1}}", false},
		{"no servers", "{}", "{}", false},
		{"another key named fly", "{\"fly\": 1, \"mcpServers\": {}}", "{\"fly\": 1, \"mcpServers\": {}}", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "mcpServers"
			if strings.Contains(tt.in, `"servers"`) {
				key = "servers"
			}
			d, err := parseJSONDoc([]byte(tt.in), key)
			if err != nil {
				t.Fatalf("parseJSONDoc = %v", err)
			}
			got, found, err := d.remove("fly")
			if err != nil || string(got) != tt.want || found != tt.found {
				t.Errorf("remove(%q) = %q, %v, %v; want %q, %v", tt.in, got, found, err, tt.want, tt.found)
			}
		})
	}
}

func TestJSONDocRefuses(t *testing.T) {
	for _, in := range []string{"[1]", "{", `{"mcpServers": [1]}`, `{"a": 1} {"b": 2}`, "nul"} {
		if _, err := parseJSONDoc([]byte(in), "mcpServers"); err == nil {
			t.Errorf("parseJSONDoc(%q) = nil error, want a refusal", in)
		}
	}
}

func TestBlankJSONC(t *testing.T) {
	in := "{\n  // a \"comment\"\n  \"a\": \"// not one\", /* b\n c */ \"d\": [1, 2,],\n}"
	got := blankJSONC([]byte(in))
	if len(got) != len(in) || strings.Count(string(got), "\n") != strings.Count(in, "\n") {
		t.Fatalf("blankJSONC changed the length or lines: %q", got)
	}
	var v map[string]any
	if err := json.Unmarshal(got, &v); err != nil || v["a"] != "// not one" {
		t.Errorf("blankJSONC(%q) = %q: %v %v", in, got, v, err)
	}
}

// FuzzJSONDoc: whatever a client's file holds, reading it never panics,
// and setting then removing fly leaves a file that reads again, without
// fly.
func FuzzJSONDoc(f *testing.F) {
	f.Add([]byte("{\n  \"mcpServers\": {\n    \"a\": {} // x\n  },\n}\n"))
	f.Add([]byte(`{"mcpServers":{"fly":{"command":"flyctl","args":["mcp"]}}}`))
	f.Add([]byte("/* */{\"servers\": null}"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseJSONDoc(b, "mcpServers")
		if err != nil {
			return
		}
		d.entries()
		out, err := d.set("fly", flyEntry)
		if err != nil {
			return
		}
		d2, err := parseJSONDoc(out, "mcpServers")
		if err != nil {
			t.Fatalf("set made a file that does not parse: %v\n%q\n%q", err, b, out)
		}
		if _, raw := d2.entries(); raw["fly"] == nil {
			t.Fatalf("set made a file without fly:\n%q", out)
		}
		out2, _, err := d2.remove("fly")
		if err != nil {
			t.Fatalf("remove = %v", err)
		}
		d3, err := parseJSONDoc(out2, "mcpServers")
		if err != nil {
			t.Fatalf("remove made a file that does not parse: %v\n%q", err, out2)
		}
		if _, raw := d3.entries(); raw["fly"] != nil {
			t.Fatalf("remove left fly:\n%q", out2)
		}
	})
}
