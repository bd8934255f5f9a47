// Package vmservice is a client of one Dart VM service connection: the VM
// service itself, the Dart Development Service (DDS) in front of it, or
// the Dart Tooling Daemon (DTD), which all speak JSON-RPC 2.0 with one
// message per WebSocket text frame (see the project's
// vm-service-protocol reference, §1).
//
// It owns the WebSocket (coder/websocket), the calls in flight and the
// events the peer sends, and it bounds everything that comes in: the
// size of a message, the events kept per second (the rest are dropped
// and counted, never queued without end), and the events waiting for
// their reader. It refuses any URI that is not on a loopback address:
// a VM service executes code for whoever reaches it.
//
// It does not know runs, sessions, MCP or the store: the daemon decides
// which app to connect to and what its events mean. It must not import
// the daemon, the go-sdk or the store.
package vmservice
