// Package jsonscan finds the bounds of JSON values in bytes without
// decoding them: no allocation, and no depth limit (nesting is counted in
// an int). It is for reading a little of a large message from outside
// (an app's VM service): the members and elements wanted are found here,
// and only they are given to encoding/json.
//
// It does not validate: on malformed input it returns -1 or stops early,
// never panics, and what encoding/json then says of the parts stands.
// It imports only the standard library.
package jsonscan

// Space returns the index of the first byte at or after i that is not
// JSON white space.
func Space(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// String returns the index after the string that starts at data[i] (a
// quote), or -1 if it does not end.
func String(data []byte, i int) int {
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

// Value returns the index after the value that starts at data[i], or -1
// if it does not end.
func Value(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return String(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				if i = String(data, i); i < 0 {
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
		case ',', '}', ']', ':', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// Members calls f with each member of the object data (its key as
// written, quotes included, and its value), in order, until f returns
// false or the object ends. It reports whether data was an object it
// could read to the end of what f wanted.
func Members(data []byte, f func(key, value []byte) bool) bool {
	i := Space(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	for {
		i = Space(data, i)
		if i < len(data) && data[i] == '}' {
			return true
		}
		if i >= len(data) || data[i] != '"' {
			return false
		}
		kEnd := String(data, i)
		if kEnd < 0 {
			return false
		}
		key := data[i:kEnd]
		i = Space(data, kEnd)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = Space(data, i+1)
		vEnd := Value(data, i)
		if vEnd < 0 {
			return false
		}
		if !f(key, data[i:vEnd]) {
			return true
		}
		i = Space(data, vEnd)
		if i < len(data) && data[i] == ',' {
			i++
			continue
		}
		return i < len(data) && data[i] == '}'
	}
}

// Elements returns the first n elements of the array data (sub-slices of
// it); nil if data is not an array.
func Elements(data []byte, n int) [][]byte {
	i := Space(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil
	}
	var out [][]byte
	for i++; len(out) < n; {
		i = Space(data, i)
		if i >= len(data) || data[i] == ']' {
			break
		}
		end := Value(data, i)
		if end < 0 {
			break
		}
		out = append(out, data[i:end])
		i = Space(data, end)
		if i >= len(data) || data[i] != ',' {
			break
		}
		i++
	}
	return out
}
