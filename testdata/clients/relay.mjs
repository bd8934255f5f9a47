// A stdio relay that records a client's conversation with a real server, for
// measure.sh (run by hand, never in CI).
// Usage: node relay.mjs LOGFILE [NAME=VALUE...] COMMAND [ARG...]
//
// It appends to LOGFILE the same "start" line as recording-server.mjs (argv,
// cwd, the names of the environment variables the client gave it), then
// starts COMMAND with that environment plus the NAME=VALUE pairs, in the same
// directory, and copies stdin and stdout line by line between the two,
// recording each line: "recv" from the client, "sent" from the server.
import { appendFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const [log, ...rest] = process.argv.slice(2);
const pair = /^[A-Za-z_][A-Za-z0-9_]*=/;
const cmd = rest.findIndex((a) => !pair.test(a));
if (!log || cmd < 0) {
  process.stderr.write("usage: relay.mjs LOGFILE [NAME=VALUE...] COMMAND [ARG...]\n");
  process.exit(2);
}
const record = (event, fields) =>
  appendFileSync(log, JSON.stringify({ event, pid: process.pid, ...fields }) + "\n");
record("start", { argv: process.argv, cwd: process.cwd(), env: Object.keys(process.env).sort() });

const env = { ...process.env };
for (const p of rest.slice(0, cmd)) {
  const eq = p.indexOf("=");
  env[p.slice(0, eq)] = p.slice(eq + 1);
}
const [command, ...args] = rest.slice(cmd);
const child = spawn(command, args, { env, stdio: ["pipe", "pipe", "inherit"] });

createInterface({ input: process.stdin }).on("line", (line) => {
  record("recv", { line });
  child.stdin.write(line + "\n");
}).on("close", () => child.stdin.end());
createInterface({ input: child.stdout }).on("line", (line) => {
  record("sent", { line });
  process.stdout.write(line + "\n");
});
child.on("exit", (code, signal) => {
  record("end", { code, signal });
  process.exit(code ?? 1);
});
