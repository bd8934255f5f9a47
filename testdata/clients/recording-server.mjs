// A stdio MCP server that records how a client started it, for measure.sh
// (run by hand, never in CI). Usage: node recording-server.mjs LOGFILE
//
// It appends JSON lines to LOGFILE: one "start" line (argv, cwd, the names of
// the environment variables it received, sorted, never their values), one
// "recv" line per JSON-RPC line it reads, and "end" when stdin closes. It
// answers initialize (echoing the requested protocolVersion if it is
// 2025-06-18 or 2025-11-25, else 2025-11-25), tools/list (empty) and ping;
// any other request, server/discover included, gets -32601 (method not found),
// as a server of the handshake era answers.
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

const log = process.argv[2];
if (!log) {
  process.stderr.write("usage: recording-server.mjs LOGFILE\n");
  process.exit(2);
}
const record = (event, fields) =>
  appendFileSync(log, JSON.stringify({ event, pid: process.pid, ...fields }) + "\n");

record("start", {
  argv: process.argv,
  cwd: process.cwd(),
  env: Object.keys(process.env).sort(),
});

const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
const known = new Set(["2025-06-18", "2025-11-25"]);

const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  record("recv", { line });
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === undefined || msg.method === undefined) return; // notification or response
  switch (msg.method) {
    case "initialize": {
      const asked = msg.params?.protocolVersion;
      send({
        id: msg.id,
        result: {
          protocolVersion: known.has(asked) ? asked : "2025-11-25",
          capabilities: { tools: {} },
          serverInfo: { name: "recording-server", version: "1.0.0" },
        },
      });
      break;
    }
    case "tools/list":
      send({ id: msg.id, result: { tools: [] } });
      break;
    case "ping":
      send({ id: msg.id, result: {} });
      break;
    default:
      send({ id: msg.id, error: { code: -32601, message: `method not found: ${msg.method}` } });
  }
});
rl.on("close", () => {
  record("end", {});
  process.exit(0);
});
