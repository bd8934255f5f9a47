package daemon

import "github.com/fly-dev/fly/daemon/index"

// The structured results of flyd's tools, as a client decodes them: the
// tests read what crosses the wire, not the MCP surface's own types.

type runsListResult struct {
	Runs []RunInfo `json:"runs"`
}

type logsReadResult struct {
	RunID     string `json:"run_id"`
	State     string `json:"state"`
	FirstSeq  uint64 `json:"first_seq" jsonschema:"the oldest seq the log holds"`
	LastSeq   uint64 `json:"last_seq" jsonschema:"the newest seq the log holds"`
	FromSeq   uint64 `json:"from_seq,omitempty" jsonschema:"the oldest seq returned; pass as before to page back"`
	ToSeq     uint64 `json:"to_seq,omitempty" jsonschema:"the newest seq returned"`
	Entries   int    `json:"entries" jsonschema:"entries returned, one per line of the text"`
	NextSince uint64 `json:"next_since" jsonschema:"pass as since to read what comes after this page"`
	Truncated bool   `json:"truncated" jsonschema:"entries that match were left out: older ones (page back with before) or, with since, newer ones (continue with next_since)"`
}

type restartResult struct {
	RunID   string `json:"run_id"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type buildResult struct {
	BuildID      string   `json:"build_id"`
	ExitCode     int      `json:"exit_code"`
	State        string   `json:"state"`
	ArtifactPath string   `json:"artifact_path,omitempty"`
	LogURI       string   `json:"log_uri"`
	LogTail      []string `json:"log_tail,omitempty"`
}

type findResult struct {
	URIs       []string `json:"uris"`
	Total      int      `json:"total" jsonschema:"how many files match in all"`
	NextCursor string   `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the next page; absent on the last"`
}

type grepResult struct {
	Files         []grepFileOut `json:"files"`
	Matches       int           `json:"matches"`
	FilesSearched int           `json:"files_searched"`
	SkippedBinary int           `json:"skipped_binary,omitempty"`
	SkippedLarge  int           `json:"skipped_large,omitempty"`
	Truncated     bool          `json:"truncated" jsonschema:"more matches follow: pass next_cursor to read them"`
	NextCursor    string        `json:"next_cursor,omitempty"`
}

type grepFileOut struct {
	URI     string            `json:"uri"`
	Matches []index.GrepMatch `json:"matches"`
}

type stopResult struct {
	RunID    string `json:"run_id"`
	State    string `json:"state"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

type createResult struct {
	ExitCode  int    `json:"exit_code"`
	Directory string `json:"directory"`
	LogURI    string `json:"log_uri"`
}

type devicesResult struct {
	Devices []device `json:"devices"`
	LogURI  string   `json:"log_uri"`
}

type doctorResult struct {
	ExitCode int    `json:"exit_code"`
	Report   string `json:"report"`
	LogURI   string `json:"log_uri"`
}

type device struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	TargetPlatform string          `json:"targetPlatform"`
	IsSupported    bool            `json:"isSupported"`
	Emulator       bool            `json:"emulator"`
	SDK            string          `json:"sdk,omitempty"`
	Capabilities   map[string]bool `json:"capabilities,omitempty"`
}

// defaultTextBudget is the text a tool returns by default, about 16 KB,
// as the tools' descriptions promise.
const defaultTextBudget = 16 << 10
