package mcpconn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fly-dev/fly/internal/wire"
)

// The rule of JSON-RPC batches for a handshake-era session over
// Streamable HTTP: MCP 2025-06-18 took them out of the protocol, and
// where they remain they are bounded.

// MaxBatch bounds a JSON-RPC batch where the negotiated version has
// batches (2025-03-26 and earlier).
const MaxBatch = 64

// CheckBatch refuses a JSON-RPC batch on a session (ss) whose negotiated
// protocol has none (2025-06-18 on), whatever the request's own version
// header says, and a batch larger than MaxBatch where batches exist. It
// returns the refusal and its status, or "" to go on; the body is left
// for the SDK to read.
func CheckBatch(r *http.Request, ss *mcp.ServerSession) (string, int) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return "read request: " + err.Error(), http.StatusRequestEntityTooLarge
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return "", 0
	}
	v := negotiatedVersion(ss)
	if v >= wire.BatchlessRevision {
		return fmt.Sprintf("Bad Request: JSON-RPC batches are not part of MCP %s, which this session negotiated: send one message per request", v), http.StatusBadRequest
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(body, &batch); err != nil {
		return "Bad Request: malformed batch: " + err.Error(), http.StatusBadRequest
	}
	if len(batch) > MaxBatch {
		return fmt.Sprintf("Bad Request: a batch of %d messages; at most %d", len(batch), MaxBatch), http.StatusRequestEntityTooLarge
	}
	return "", 0
}

// negotiatedVersion is the protocol version a session agreed on: the
// client's, if flyd speaks it, else flyd's newest.
func negotiatedVersion(ss *mcp.ServerSession) string {
	versions := mcp.SupportedProtocolVersions()
	newest := slices.Max(versions)
	if ss == nil || ss.InitializeParams() == nil {
		return newest
	}
	if v := ss.InitializeParams().ProtocolVersion; slices.Contains(versions, v) {
		return v
	}
	return newest
}
