package runs

// flutterRun is a `flutter run --machine` of flyd's: it speaks the
// --machine protocol, its app's framework errors are kept, and it is
// asked to stop (app.stop) before it is signalled. It belongs to the
// engine, never to the call that started it, and with holders it
// outlives flyd: an app a developer works on survives flyd's restart.
// (A build or one-shot command belongs to its call, which a restart of
// flyd ends; an upstream MCP server's session is flyd's go-sdk client's,
// which does not survive it either, and it is restarted on demand: those
// end with flyd.)
var flutterRun = kindOptions{
	machine:     true,
	errorList:   true,
	stopRequest: "app.stop",
	held:        true,
}
