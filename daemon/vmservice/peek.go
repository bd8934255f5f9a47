package vmservice

import (
	"encoding/json"

	"github.com/fly-dev/fly/internal/jsonscan"
)

// maxPeekValue bounds the id and method peek returns: a longer one is
// not a VM service's.
const maxPeekValue = 128

// peek reads a message's top-level id and method without decoding the
// rest, whatever its depth or size: an answer that no decoder takes (one
// nested deeper than encoding/json's 10,000 levels, say) still reaches
// its call as an error, and a notification over the rate is dropped
// before it is decoded. It stops at the method: a notification's params
// (the VM writes them after it) are not read at all. A string id is returned unquoted, a number as it
// is written; "" when the message has none, or is not a JSON object.
func peek(data []byte) (id, method string) {
	jsonscan.Members(data, func(key, value []byte) bool {
		if len(value) <= maxPeekValue+2 {
			switch string(key) {
			case `"id"`:
				id = scalar(value)
			case `"method"`:
				method = scalar(value)
			}
		}
		return method == "" // a request or notification: its id is not needed, nor the rest read
	})
	return id, method
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
