package holder

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The versions of the holder protocol this build speaks, as link-time
// text (see the package doc). A test builds a flyd one version newer with
// -X github.com/fly-dev/fly/internal/holder.protocolVersion=2.
var (
	protocolMin     = "1"
	protocolVersion = "1"
)

// Versions is the range of holder protocol versions this build speaks.
func Versions() Range {
	lo, err1 := strconv.Atoi(protocolMin)
	hi, err2 := strconv.Atoi(protocolVersion)
	if err1 != nil || err2 != nil || lo < 1 || hi < lo {
		panic(fmt.Sprintf("holder protocol versions %q…%q set at link time are not a range", protocolMin, protocolVersion))
	}
	return Range{Min: lo, Max: hi}
}

// Negotiate returns the version a client that speaks c uses with a holder
// that speaks h: the highest both speak. ok is false when they share none.
func Negotiate(c, h Range) (v int, ok bool) {
	v = min(c.Max, h.Max)
	return v, v >= max(c.Min, h.Min) && v >= 1
}

// Timeouts of the connection.
const (
	// handshakeTimeout bounds the banner and the hello, and a holder's
	// start until it has answered.
	handshakeTimeout = 10 * time.Second
	// writeTimeout bounds one write to a peer.
	writeTimeout = 10 * time.Second
	// pingEvery: a holder with nothing else to send says so this often,
	// and a flyd that hears nothing for idleTimeout takes it for hung.
	pingEvery   = 10 * time.Second
	idleTimeout = 45 * time.Second
)

// maxControl bounds a control message's JSON.
const maxControl = 16 << 10

// message is one control message (see the package doc); its kind is T.
type message struct {
	T     string `json:"t"`
	ID    uint64 `json:"id,omitempty"`
	Min   int    `json:"min,omitempty"`
	Max   int    `json:"max,omitempty"`
	V     int    `json:"v,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Run   string `json:"run,omitempty"`
	After uint64 `json:"after,omitempty"`
	Seq   uint64 `json:"seq,omitempty"`
	Sig   string `json:"sig,omitempty"`
	Err   string `json:"err,omitempty"`
	Full  bool   `json:"full,omitempty"`
	VM    string `json:"vm,omitempty"`
}

// Kinds of control message.
const (
	msgBanner = "banner"
	msgHello  = "hello"
	msgAck    = "ack"
	msgSignal = "signal"
	msgReply  = "reply"
	msgMeta   = "meta"
	msgSpool  = "spool"
	msgPing   = "ping"
)

// Signals as the protocol names them.
const (
	sigTerm = "term"
	sigKill = "kill"
)

// controlRecord encodes m as a control record.
func controlRecord(m message) []byte {
	b, err := json.Marshal(m)
	if err != nil || len(b) > maxControl {
		panic(fmt.Sprintf("holder control message %q: %v", m.T, err))
	}
	return AppendRecord(nil, Record{Type: typeControl, Data: b})
}

// parseControl decodes a control record's payload, bounded.
func parseControl(b []byte) (message, error) {
	var m message
	if len(b) > maxControl {
		return m, fmt.Errorf("a control message of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("a control message: %w", err)
	}
	if m.T == "" {
		return m, fmt.Errorf("a control message without its kind")
	}
	return m, nil
}
