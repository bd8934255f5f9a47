package runs

import "io"

// upstreamServer is one of the user's other MCP servers (Spec.Command),
// which the daemon's upstream manager speaks to on its stdin and stdout:
// the log is its stderr. It ends with its leader: what it started (an
// analysis server) goes with it. It dies with the context it was started
// with, the upstream's.
var upstreamServer = kindOptions{
	endsWithCall:   true,
	callerSpeaks:   true,
	endsWithLeader: true,
}

// Stdio is the stdin and stdout of a live upstream (Spec.Command): the
// caller speaks on them; nil for any other run. The engine closes stdin
// when the process ends.
func (r *Run) Stdio() (io.WriteCloser, io.ReadCloser) {
	if !r.opts.callerSpeaks || r.proc == nil {
		return nil, nil
	}
	return r.proc.stdin, r.proc.stdout
}
