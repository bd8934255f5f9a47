package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// This file holds the relay's pure line logic: framing, classification of
// JSON-RPC messages and the error replies the shim writes itself. Nothing
// here does I/O, so it is table-tested and fuzzed (FuzzLine).

// JSON-RPC error codes the shim answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInternalError  = -32603
)

// maxReason bounds the detail the shim puts in an error message.
const maxReason = 200

// trimEOL returns line without one trailing "\n" or "\r\n".
func trimEOL(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
	}
	return line
}

// isBlank reports whether line holds nothing but JSON whitespace.
func isBlank(line []byte) bool {
	for _, c := range line {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return false
		}
	}
	return true
}

// kind is what a JSON-RPC message is, as far as the relay cares.
type kind uint8

const (
	kindOther        kind = iota // valid JSON, but neither a request, notification nor response
	kindRequest                  // has a method and a non-null id: it expects a reply
	kindNotification             // has a method and no id (or a null one)
	kindResponse                 // has an id member and no method
)

func (k kind) String() string {
	switch k {
	case kindRequest:
		return "request"
	case kindNotification:
		return "notification"
	case kindResponse:
		return "response"
	}
	return "other"
}

// envelope holds the two members of a JSON-RPC message the relay reads.
// The rest of the message is skipped, never copied.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
}

// plainEnvelope is envelope without its UnmarshalJSON method.
type plainEnvelope envelope

// UnmarshalJSON decodes the id and method of an object and leaves e zero
// for any other JSON value, so that a batch element which is not an object
// does not fail the whole batch.
func (e *envelope) UnmarshalJSON(b []byte) error {
	*e = envelope{}
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	return json.Unmarshal(b, (*plainEnvelope)(e))
}

// kind classifies the message e was decoded from.
func (e envelope) kind() kind {
	hasMethod := len(e.Method) > 0 && !isNull(e.Method)
	switch {
	case hasMethod && len(e.ID) > 0 && !isNull(e.ID):
		return kindRequest
	case hasMethod:
		return kindNotification
	case len(e.ID) > 0:
		return kindResponse
	}
	return kindOther
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// classify decodes what the relay needs from one line: the envelope of
// each message in it (one for an object, one per element for a batch,
// none for any other JSON value) and whether it is a batch. It returns an
// error, with a short reason, exactly when line is not valid JSON.
func classify(line []byte) (msgs []envelope, batch bool, err error) {
	switch firstByte(line) {
	case '{':
		var e plainEnvelope
		if err = json.Unmarshal(line, &e); err == nil {
			msgs = []envelope{envelope(e)}
		}
	case '[':
		batch = true
		err = json.Unmarshal(line, &msgs)
	default:
		if !json.Valid(line) {
			var v struct{}
			err = json.Unmarshal(line, &v)
			if err == nil { // unreachable: json.Valid and Unmarshal agree
				err = errors.New("invalid JSON")
			}
		}
	}
	if err != nil {
		return nil, false, errors.New(syntaxReason(err))
	}
	return msgs, batch, nil
}

// firstByte is the first non-whitespace byte of b, or 0.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return c
		}
	}
	return 0
}

// syntaxReason turns a decoding error into a short, single-line reason.
func syntaxReason(err error) string {
	var se *json.SyntaxError
	s := err.Error()
	if errors.As(err, &se) {
		s = fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return truncate(s, maxReason)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// idKey maps a JSON-RPC id to a string that is equal for ids a peer may
// consider the same after re-encoding them: a string id by its decoded
// value, a number by its integer or shortest float form, anything else by
// its compact text.
func idKey(id json.RawMessage) string {
	id = bytes.TrimSpace(id)
	switch c := firstByte(id); {
	case c == '"':
		var s string
		if json.Unmarshal(id, &s) == nil {
			return "s" + s
		}
	case c == '-' || '0' <= c && c <= '9':
		if n, err := strconv.ParseInt(string(id), 10, 64); err == nil {
			return "n" + strconv.FormatInt(n, 10)
		}
		if f, err := strconv.ParseFloat(string(id), 64); err == nil {
			if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
				return "n" + strconv.FormatInt(int64(f), 10)
			}
			return "n" + strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, id) == nil {
		return "r" + b.String()
	}
	return "r" + string(id)
}

// rpcError is a JSON-RPC error response written by the shim itself.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func newRPCError(id json.RawMessage, code int, msg string) rpcError {
	if len(id) == 0 || !json.Valid(id) {
		id = json.RawMessage("null")
	}
	e := rpcError{JSONRPC: "2.0", ID: id}
	e.Error.Code = code
	e.Error.Message = msg
	return e
}

// errorReply builds the one-line JSON-RPC error response to id (null when
// id is empty or not valid JSON).
func errorReply(id json.RawMessage, code int, msg string) []byte {
	b, err := json.Marshal(newRPCError(id, code, msg))
	if err != nil { // unreachable: every field is valid
		b, _ = json.Marshal(newRPCError(nil, code, msg))
	}
	return b
}

// errorBatch builds a one-line batch response holding one error per id.
func errorBatch(ids []json.RawMessage, code int, msg string) []byte {
	es := make([]rpcError, len(ids))
	for i, id := range ids {
		es[i] = newRPCError(id, code, msg)
	}
	b, err := json.Marshal(es)
	if err != nil { // unreachable: every field is valid
		return errorReply(nil, code, msg)
	}
	return b
}

// parseErrorReply is the response to a line that is not valid JSON.
func parseErrorReply(reason string) []byte {
	return errorReply(nil, codeParseError, "parse error: "+truncate(reason, maxReason))
}

// requestIDs returns the ids of the requests among msgs.
func requestIDs(msgs []envelope) []json.RawMessage {
	var ids []json.RawMessage
	for _, m := range msgs {
		if m.kind() == kindRequest {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// tooBigReply is the response to a line of size bytes over flyd's limit of
// max bytes: one error per request in it, as a batch when the line was
// one. It is nil when the line holds no request, so nothing is written.
func tooBigReply(msgs []envelope, batch bool, size, max int64) []byte {
	ids := requestIDs(msgs)
	if len(ids) == 0 {
		return nil
	}
	msg := fmt.Sprintf("message of %d bytes exceeds flyd's limit of %d bytes (flyd --max-message-mb)", size, max)
	if batch {
		return errorBatch(ids, codeInvalidRequest, msg)
	}
	return errorReply(ids[0], codeInvalidRequest, msg)
}

// inbound reads a message received from flyd, in msg: it returns the
// buffer holding the line to write to stdout (without its "\n"), and the
// envelopes of its messages. A message holding a raw newline is compacted
// into scratch. Otherwise the line is msg as it came, and only its
// envelope is read, by scan; a batch or anything scan does not handle is
// decoded whole by classify. It fails when the message is found not to be
// JSON, which is never written: stdout carries only protocol.
func inbound(msg, scratch *bytes.Buffer) (line *bytes.Buffer, msgs []envelope, batch bool, err error) {
	line = msg
	if bytes.IndexByte(msg.Bytes(), '\n') >= 0 {
		scratch.Reset()
		if err := json.Compact(scratch, msg.Bytes()); err != nil {
			return nil, nil, false, errors.New(syntaxReason(err))
		}
		line = scratch
	}
	if e, ok := scan(line.Bytes()); ok {
		return line, []envelope{e}, false, nil
	}
	msgs, batch, err = classify(line.Bytes())
	if err != nil {
		return nil, nil, false, err
	}
	return line, msgs, batch, nil
}
