package runs

// flutterRun is a `flutter run --machine` of flyd's: it speaks the
// --machine protocol, its app's framework errors are kept, and it is
// asked to stop (app.stop) before it is signalled. It belongs to the
// engine, never to the call that started it.
var flutterRun = kindOptions{
	machine:     true,
	errorList:   true,
	stopRequest: "app.stop",
}
