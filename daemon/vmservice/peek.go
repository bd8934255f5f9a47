package vmservice

import "encoding/json"

// maxPeekValue bounds the id and method peek returns: a longer one is
// not a VM service's.
const maxPeekValue = 128

// peek reads a message's top-level id and method without decoding the
// rest, whatever its depth or size: an answer that no decoder takes (one
// nested deeper than encoding/json's 10,000 levels, say) still reaches
// its call as an error, and a notification over the rate is dropped
// before it is decoded. A string id is returned unquoted, a number as it
// is written; "" when the message has none, or is not a JSON object.
func peek(data []byte) (id, method string) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return "", ""
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != '"' {
			return id, method // '}' or malformed: what was found stands
		}
		kEnd := skipString(data, i)
		if kEnd < 0 {
			return id, method
		}
		key := string(data[i+1 : kEnd-1])
		i = skipSpace(data, kEnd)
		if i >= len(data) || data[i] != ':' {
			return id, method
		}
		i = skipSpace(data, i+1)
		vEnd := skipValue(data, i)
		if vEnd < 0 {
			return id, method
		}
		if raw := data[i:vEnd]; len(raw) <= maxPeekValue+2 {
			switch key {
			case "id":
				id = scalar(raw)
			case "method":
				method = scalar(raw)
			}
		}
		i = skipSpace(data, vEnd)
		if i >= len(data) || data[i] != ',' {
			return id, method
		}
		i++
	}
}

// scalar is a string's value or a number's text; "" for anything else.
func scalar(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	if raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') {
		return string(raw)
	}
	return ""
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at data[i]
// (a quote), or -1 if it does not end.
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the value that starts at data[i],
// counting nesting in an int (no depth limit, no allocation), or -1 if
// it does not end.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				if i = skipString(data, i); i < 0 {
					return -1
				}
				i--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for ; i < len(data); i++ { // a number, true, false, null
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}
