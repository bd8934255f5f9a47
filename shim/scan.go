package shim

import "bytes"

// This file reads the envelope of a message from flyd without decoding
// it. flyd's replies can be megabytes (a whole file, a page of log), and
// the relay needs only their id: scan walks the top-level members and
// stops as soon as the message's kind is known, which for flyd's replies
// (encoded by the go-sdk as jsonrpc, id, then result or error) is before
// the result's first byte.

// scan returns the id and method members of msg, a JSON object, read
// without validating or decoding the rest. It stops once the kind is
// known: at "result" or "error" after an id (a response), or when both id
// and method are seen (a request). ok is false when msg is not an object
// or the scan meets something it does not handle (a key with escapes,
// bytes that cannot be JSON); the caller then decodes with classify.
//
// On a valid object with unique keys that is not both a request and a
// response, scan agrees with classify (FuzzScan checks this).
func scan(msg []byte) (e envelope, ok bool) {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return envelope{}, false
	}
	i++
	for {
		i = skipSpace(msg, i)
		if i >= len(msg) {
			return envelope{}, false
		}
		if msg[i] == '}' {
			return e, true
		}
		if msg[i] != '"' {
			return envelope{}, false
		}
		end := bytes.IndexByte(msg[i+1:], '"')
		if end < 0 {
			return envelope{}, false
		}
		key := msg[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 || caseVariant(key) {
			return envelope{}, false // rare: let classify decode it
		}
		i = skipSpace(msg, i+end+2)
		if i >= len(msg) || msg[i] != ':' {
			return envelope{}, false
		}
		i = skipSpace(msg, i+1)
		switch string(key) {
		case "result", "error":
			if len(e.ID) > 0 {
				return e, true
			}
		}
		start := i
		if i, ok = skipValue(msg, i); !ok {
			return envelope{}, false
		}
		switch string(key) {
		case "id":
			e.ID = msg[start:i]
		case "method":
			e.Method = msg[start:i]
		}
		if len(e.ID) > 0 && len(e.Method) > 0 {
			return e, true
		}
		i = skipSpace(msg, i)
		switch {
		case i >= len(msg):
			return envelope{}, false
		case msg[i] == ',':
			i++
		case msg[i] != '}':
			return envelope{}, false
		}
	}
}

// caseVariant reports whether key is a member scan reads, spelled in
// another case: encoding/json, and so classify, matches names without
// regard to case.
func caseVariant(key []byte) bool {
	for _, m := range [...]string{"id", "method", "result", "error"} {
		if len(key) == len(m) && string(key) != m && bytes.EqualFold(key, []byte(m)) {
			return true
		}
	}
	return false
}

// skipSpace returns the index of the first byte at or after i that is
// not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				var ok bool
				if i, ok = skipString(b, i); !ok {
					return i, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	}
	// A number, true, false or null: up to the next delimiter.
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i, i > start
		case '"', '{', '[', ':':
			return i, false
		}
		i++
	}
	return i, i > start
}

// skipString returns the index just past the JSON string starting at
// b[i], which is '"'.
func skipString(b []byte, i int) (int, bool) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b), false
		}
		i += j
		// The quote ends the string unless an odd number of
		// backslashes precedes it.
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i, true
		}
	}
}
