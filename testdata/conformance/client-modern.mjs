#!/usr/bin/env node
// Checks an MCP stdio server (normally `flyctl mcp`) with the official
// TypeScript SDK's v2 client (@modelcontextprotocol/client) speaking MCP
// 2026-07-28: server/discover instead of initialize, per-request _meta, a
// subscriptions/listen stream. (The v1 SDK, client.mjs, speaks the
// handshake era only.)
//
// Environment: FLY_CONF_COMMAND, FLY_CONF_ARGS, FLY_CONF_TOUCH and
// FLY_CONF_TIMEOUT as for client.mjs; every FLY_* variable but FLY_CONF_*
// is passed to the server. Each step prints one JSON line
// {"step": ..., "ok": true|false, ...}; the exit status is 1 if any failed.

import { appendFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const MODERN = "2026-07-28";
const MAIN_URI = "workspace:///lib/main.dart";
const WAIT_MS = 10_000;
const NAME = "ts-sdk-modern";

let failed = false;
function report(step, ok, fields = {}) {
  if (!ok) failed = true;
  process.stdout.write(JSON.stringify({ step, ok, ...fields }) + "\n");
}
async function step(name, fn) {
  try {
    const { ok = true, ...fields } = await fn();
    report(name, ok, fields);
  } catch (err) {
    report(name, false, { error: err instanceof Error ? err.message : String(err) });
  }
}

const env = process.env;
if (!env.FLY_CONF_COMMAND || !env.FLY_CONF_TOUCH) {
  process.stderr.write("client-modern.mjs: FLY_CONF_COMMAND and FLY_CONF_TOUCH must be set\n");
  process.exit(2);
}
const args = env.FLY_CONF_ARGS ? JSON.parse(env.FLY_CONF_ARGS) : [];
const serverEnv = Object.fromEntries(
  Object.entries(env).filter(([k, v]) => typeof v === "string" && k.startsWith("FLY_") && !k.startsWith("FLY_CONF_")),
);
const timer = setTimeout(() => {
  report("timeout", false, { error: `not done within ${env.FLY_CONF_TIMEOUT || 60}s` });
  process.exit(1);
}, Number(env.FLY_CONF_TIMEOUT || "60") * 1000);

// waiter resolves when pred accepts a notification's params.
const waiting = [];
function waitFor(method, pred) {
  return new Promise((resolve, reject) => {
    const w = { method, pred, resolve };
    waiting.push(w);
    setTimeout(() => reject(new Error(`no ${method} within ${WAIT_MS} ms`)), WAIT_MS);
  });
}
function deliver(method, params) {
  for (const w of waiting.splice(0)) {
    if (w.method === method && w.pred(params)) w.resolve(params);
    else waiting.push(w);
  }
}

const client = new Client({ name: NAME, version: "2.3.1" }, { versionNegotiation: { mode: { pin: MODERN } } });
const seen = [];
for (const method of ["notifications/resources/updated", "notifications/resources/list_changed", "notifications/tools/list_changed"]) {
  client.setNotificationHandler(method, (n) => {
    seen.push(n);
    deliver(method, n.params ?? {});
  });
}
const transport = new StdioClientTransport({ command: env.FLY_CONF_COMMAND, args, env: serverEnv, stderr: "inherit" });

await step("connect", async () => {
  await client.connect(transport);
  const v = client.getNegotiatedProtocolVersion();
  return { ok: v === MODERN, version: v };
});
await step("tools/list", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  return { ok: names.includes("flutter_run") && names.includes("files_grep"), tools: names.length };
});
await step("fly://sessions/current", async () => {
  const res = await client.readResource({ uri: "fly://sessions/current" });
  const text = res.contents[0]?.text ?? "";
  return { ok: text.includes(NAME), text: text.slice(0, 200) };
});
let sub;
await step("subscriptions/listen", async () => {
  sub = await client.listen({ resourcesListChanged: true, resourceSubscriptions: [MAIN_URI] });
  const f = sub.honoredFilter;
  return { ok: f.resourcesListChanged === true && (f.resourceSubscriptions ?? []).includes(MAIN_URI), honored: f };
});
await step("resources/updated on the stream", async () => {
  const got = waitFor("notifications/resources/updated", (p) => p.uri === MAIN_URI);
  appendFileSync(env.FLY_CONF_TOUCH, "// touched by client-modern.mjs\n");
  const p = await got;
  return { ok: p._meta?.["io.modelcontextprotocol/subscriptionId"] !== undefined, params: p };
});
await step("resources/list_changed on the stream", async () => {
  const got = waitFor("notifications/resources/list_changed", () => true);
  writeFileSync(join(dirname(env.FLY_CONF_TOUCH), "modern_client_page.dart"), "class ModernClientPage {}\n");
  await got;
  return {};
});
await step("tools/call files_grep", async () => {
  const res = await client.callTool({ name: "files_grep", arguments: { pattern: "ModernClientPage", literal: true } });
  const text = (res.content ?? []).map((c) => c.text ?? "").join("\n");
  return { ok: !res.isError && text.includes("modern_client_page.dart"), text: text.slice(0, 200) };
});
await step("nothing unasked", async () => {
  const unasked = seen.filter((n) => n.method === "notifications/tools/list_changed");
  return { ok: unasked.length === 0, unasked: unasked.length };
});
await sub?.close().catch(() => {});
await client.close().catch(() => {});
clearTimeout(timer);
process.exit(failed ? 1 : 0);
