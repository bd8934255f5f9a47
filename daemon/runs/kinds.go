package runs

import "github.com/fly-dev/fly/store"

// kindOptions say what a kind of process does differently from the
// others: the engine, the process and the output read these options
// rather than compare kinds. Each kind's options are in its own file:
// kind_run.go, kind_attach.go, kind_build.go, kind_upstream.go (and
// kind_app.go for an app flyd attached to, which has no process).
type kindOptions struct {
	// endsWithCall: the process belongs to the call that started it as
	// well as to the engine: the end of that call's context (its client
	// cancelled it, its deadline passed) kills the process group, and the
	// run ends cancelled or failed (see cancelReason).
	endsWithCall bool

	// machine: it speaks flutter's --machine protocol: its stdout is read
	// as --machine lines, and flyd writes requests to its stdin.
	machine bool

	// callerSpeaks: its stdin and stdout are the caller's (an MCP client
	// speaks on them; see Run.Stdio): the engine reads only its stderr.
	callerSpeaks bool

	// endsWithLeader: what the leader started ends with it (its group is
	// killed once the leader exits), and only then is its stderr
	// complete: stderr is a pipe of the engine's own, which the leader's
	// exit does not close.
	endsWithLeader bool

	// errorList: the app's framework errors are kept (Run.Errors) and
	// followed on its VM service.
	errorList bool

	// stopRequest is the --machine request that asks the app to end
	// before any signal, once it has started ("app.stop"); "" for none.
	stopRequest string

	// held: with Config.Holders, its process is held by a holder of its
	// own, which outlives flyd (see heldProcess).
	held bool
}

// optionsOf returns the options of kind. A kind without options of its
// own is a one-shot command.
func optionsOf(kind store.Kind) kindOptions {
	switch kind {
	case store.KindRun:
		return flutterRun
	case store.KindAttach:
		return flutterAttach
	case store.KindUpstream:
		return upstreamServer
	case store.KindApp:
		return attachedApp
	}
	return oneShot
}
