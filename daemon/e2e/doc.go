// Package e2e tests flyd end to end, as its users meet it: the built
// flyd and flyctl (internal/flytest), the shim over a real socket,
// Streamable HTTP and WebSockets on the loopback listener, real MCP
// clients (the go-sdk's, the TypeScript SDK's, the conformance suite),
// the dashboard in a browser, the fake flutter and hostile apps, and the
// benchmarks of the whole daemon.
//
// It is a black box: besides the binaries, it uses only the daemon's
// exported API (Server.Run, ServeTransport, Status, Runs) and the
// module's other packages (daemon/mcpserver's result types,
// internal/wire, internal/localclient, the fakes), never the daemon's
// internals, whose own tests stay in package daemon. It holds tests
// only: this file is its one non-test file.
package e2e
