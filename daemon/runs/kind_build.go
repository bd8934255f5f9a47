package runs

// oneShot is a `flutter build` or a one-shot command (devices, doctor,
// create): it dies with the call that started it (cancelled by its
// client, or timed out), and its output is only text.
var oneShot = kindOptions{
	endsWithCall: true,
}
