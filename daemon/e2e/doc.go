// Package e2e tests flyd end to end, as its users meet it: the built
// flyd and flyctl (internal/flytest), the shim over a real socket,
// Streamable HTTP and WebSockets on the loopback listener, real MCP
// clients (the go-sdk's, the TypeScript SDK's, the conformance suite),
// the dashboard in a browser, the fake flutter and hostile apps, and the
// benchmarks of the whole daemon.
//
// Besides the binaries, it imports the module's exported packages, never
// the unexported internals of any (whose own tests stay in their
// packages):
//   - daemon: a Server in process (New, Run, ServeTransport, Status,
//     Runs) where a test needs one it can look into or time;
//   - daemon/mcpserver: the tools' structured result types, to decode
//     answers;
//   - daemon/mcpconn: the WebSocket connection, for clients that dial
//     flyd's endpoint themselves;
//   - daemon/runs and store: a runs engine on its own store, and its
//     holders, in the benchmarks of runs and fan-out;
//   - daemon/inspect: the widget tree summary, in its benchmark;
//   - daemon/endpoint and internal/owner: the peer check, in the test of
//     another user's connection (Unix, as root);
//   - internal/holder: a holder's state and spool files, read from the
//     runs directory to check what it recorded;
//   - internal/wire, internal/localclient, internal/paths and
//     internal/proc: the HTTP API's types and client, the environment
//     variables and directories, whether a pid is alive;
//   - internal/flytest, internal/fakeflutter and internal/fakeupstream:
//     the built binaries, the fake flutter and a fake upstream server.
//
// It holds tests only: this file is its one non-test file.
package e2e
