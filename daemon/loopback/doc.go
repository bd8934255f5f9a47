// Package loopback guards flyd's loopback TCP listener.
//
// The listener serves the socket's handler to clients that
// cannot use the socket: HTTP MCP clients, remote tools through a
// forwarded port, the dashboard in a browser. Peer credentials cannot
// guard TCP, so every request carries the bearer token from the state
// directory in its Authorization header; the Host header must be a
// loopback name (a DNS-rebinding page cannot name 127.0.0.1), and a
// browser's cross-origin request is refused.
//
// No credential a browser sends by itself (a cookie, HTTP auth) is
// accepted: browsers send a host's cookies to every port of it (RFC 6265
// §8.5), so any local web server the user visits would get them. The
// dashboard's page takes the token from the URL fragment, which is never
// sent to a server, keeps it in sessionStorage (per origin, port
// included) and sends it as Authorization. Only the page's static files
// are served without the token: they hold no data.
//
// A session over TCP gets flyd's environment and names its workspace in
// the URL: the headers that set a session's environment or root
// (X-Fly-Env, X-Fly-Workspace) are the shim's, honoured on the Unix
// socket only, where the peer is checked to be this user.

// It owns the listen address check, the token file, the guard and the
// connection cap. It does not own the routes it guards (the daemon and
// daemon/localapi) or the sessions served behind it: it is apart from the
// daemon because it is the one place that decides who may use TCP, and
// it has no state but the token.
package loopback
