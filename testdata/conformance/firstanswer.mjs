#!/usr/bin/env node
// First answer with the official TypeScript SDK client: spawn an MCP stdio
// server, connect (initialize), and make its first listing; print the time
// from spawn to that answer. BenchmarkFirstAnswer runs it against
// `flyctl mcp` and against @modelcontextprotocol/server-filesystem.
//
// Environment:
//   FLY_FA_COMMAND  executable of the server (required)
//   FLY_FA_ARGS     JSON array of its arguments (default [])
//   FLY_FA_LIST     "resources" (resources/list) or a directory for the
//                   list_directory tool (required)
//   FLY_FA_RUNS     how many times (default 3)
//
// Prints one JSON line per run: {"ms": <spawn to first listing>, "items": N}.
// Every FLY_* variable but FLY_FA_* is passed to the server.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";

const command = process.env.FLY_FA_COMMAND;
const list = process.env.FLY_FA_LIST;
if (!command || !list) {
  console.error("FLY_FA_COMMAND and FLY_FA_LIST are required");
  process.exit(2);
}
const args = JSON.parse(process.env.FLY_FA_ARGS ?? "[]");
const runs = Number(process.env.FLY_FA_RUNS ?? "3");
const env = getDefaultEnvironment();
for (const [k, v] of Object.entries(process.env)) {
  if (k.startsWith("FLY_") && !k.startsWith("FLY_FA_")) env[k] = v;
}

for (let i = 0; i < runs; i++) {
  const start = performance.now();
  const client = new Client({ name: "first-answer", version: "1" });
  await client.connect(new StdioClientTransport({ command, args, env, stderr: "inherit" }));
  let items;
  if (list === "resources") {
    items = (await client.listResources()).resources.length;
  } else {
    const res = await client.callTool({ name: "list_directory", arguments: { path: list } });
    if (res.isError) throw new Error(JSON.stringify(res));
    items = res.content[0].text.split("\n").length;
  }
  const ms = performance.now() - start;
  await client.close();
  console.log(JSON.stringify({ ms, items }));
}
