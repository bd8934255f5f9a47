#!/usr/bin/env node
// Conformance check of an MCP stdio server (normally `flyctl mcp`) with the
// unmodified official TypeScript SDK client (@modelcontextprotocol/sdk).
//
// Environment:
//   FLY_CONF_COMMAND       executable of the server (required)
//   FLY_CONF_ARGS          JSON array of its arguments (default [])
//   FLY_CONF_CWD           working directory of the server (default: ours)
//   FLY_CONF_TOUCH         absolute path of the workspace's lib/main.dart; the
//                          script appends a comment to it to trigger
//                          notifications/resources/updated (required)
//   FLY_CONF_EXPECT_FILES  number of workspace:/// resources resources/list
//                          must return (optional; without it, at least one)
//   FLY_CONF_PASS_ENV      extra variable names, space separated, to pass to
//                          the server besides FLY_* (optional)
//   FLY_CONF_TIMEOUT       seconds before the whole run is abandoned (default 60)
//
// Like a real client, the SDK starts the server with a minimal environment
// (HOME, LOGNAME, PATH, SHELL, TERM, USER). This script adds every FLY_*
// variable except FLY_CONF_* (so a test can set FLY_SOCKET and
// FLY_STATE_DIR) and the names in FLY_CONF_PASS_ENV.
//
// Each step prints one JSON line {"step": ..., "ok": true|false, ...} on
// stdout. The exit status is 1 if any step failed, 2 on a usage error.

import { appendFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const MAIN_URI = "workspace:///lib/main.dart";
const PUBSPEC_URI = "workspace:///pubspec.yaml";
// The deep forms reach /etc/passwd from a root at any depth up to 10, so a
// server that joins paths naively really serves it instead of failing with
// "no such file".
const DEEP = "../".repeat(10);
const ESCAPING_URIS = [
  "workspace:///../etc/passwd",
  `workspace:///${DEEP}etc/passwd`,
  `workspace:///${DEEP.replaceAll("..", "%2e%2e")}etc/passwd`,
  `workspace:///lib/${DEEP}etc/passwd`,
];
const UPDATE_WAIT_MS = 10_000;
const MAX_PAGES = 10_000;

let failed = false;

function report(step, ok, fields = {}) {
  if (!ok) failed = true;
  process.stdout.write(JSON.stringify({ step, ok, ...fields }) + "\n");
}

function usage(msg) {
  process.stderr.write(`client.mjs: ${msg}\n`);
  process.exit(2);
}

function errorText(err) {
  return err instanceof Error ? err.message : String(err);
}

function config() {
  const env = process.env;
  if (!env.FLY_CONF_COMMAND) usage("FLY_CONF_COMMAND is not set");
  if (!env.FLY_CONF_TOUCH) usage("FLY_CONF_TOUCH is not set");
  let args = [];
  if (env.FLY_CONF_ARGS) {
    try {
      args = JSON.parse(env.FLY_CONF_ARGS);
    } catch (err) {
      usage(`FLY_CONF_ARGS is not JSON: ${errorText(err)}`);
    }
    if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) {
      usage("FLY_CONF_ARGS must be a JSON array of strings");
    }
  }
  let expectFiles;
  if (env.FLY_CONF_EXPECT_FILES) {
    expectFiles = Number(env.FLY_CONF_EXPECT_FILES);
    if (!Number.isInteger(expectFiles) || expectFiles < 0) {
      usage("FLY_CONF_EXPECT_FILES must be a non-negative integer");
    }
  }
  const timeout = Number(env.FLY_CONF_TIMEOUT || "60");
  if (!(timeout > 0)) usage("FLY_CONF_TIMEOUT must be a positive number of seconds");
  return {
    command: env.FLY_CONF_COMMAND,
    args,
    cwd: env.FLY_CONF_CWD || undefined,
    touch: env.FLY_CONF_TOUCH,
    expectFiles,
    timeoutMs: timeout * 1000,
  };
}

// serverEnv is what the server gets on top of the SDK's default environment
// (HOME, LOGNAME, PATH, SHELL, TERM, USER): every FLY_* variable except
// FLY_CONF_*, and the names listed in FLY_CONF_PASS_ENV, as a user would put
// them in a client's config.
function serverEnv() {
  const pass = new Set((process.env.FLY_CONF_PASS_ENV ?? "").split(/\s+/).filter(Boolean));
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([k, v]) => typeof v === "string" && ((k.startsWith("FLY_") && !k.startsWith("FLY_CONF_")) || pass.has(k)),
    ),
  );
}

// listAll follows nextCursor until the last page.
async function listAll(fetchPage, key) {
  const items = [];
  const seen = new Set();
  let cursor;
  let pages = 0;
  do {
    const page = await fetchPage(cursor === undefined ? {} : { cursor });
    pages++;
    items.push(...(page[key] ?? []));
    cursor = page.nextCursor;
    if (cursor !== undefined) {
      if (seen.has(cursor)) throw new Error(`${key}: cursor ${JSON.stringify(cursor)} repeated`);
      seen.add(cursor);
    }
    if (pages > MAX_PAGES) throw new Error(`${key}: more than ${MAX_PAGES} pages`);
  } while (cursor !== undefined);
  return { items, pages };
}

// contentBytes returns the bytes of one resources/read content item.
function contentBytes(c) {
  if (typeof c.text === "string") return Buffer.from(c.text, "utf8");
  if (typeof c.blob === "string") return Buffer.from(c.blob, "base64");
  return undefined;
}

async function step(name, fn) {
  try {
    const { ok = true, ...fields } = await fn();
    report(name, ok, fields);
  } catch (err) {
    report(name, false, { error: errorText(err) });
  }
}

async function main() {
  const cfg = config();
  const watchdog = setTimeout(() => {
    report("timeout", false, { error: `run took more than ${cfg.timeoutMs / 1000}s` });
    process.exit(1);
  }, cfg.timeoutMs);
  watchdog.unref();

  const transport = new StdioClientTransport({
    command: cfg.command,
    args: cfg.args,
    cwd: cfg.cwd,
    env: serverEnv(),
    stderr: "inherit",
  });
  const client = new Client({ name: "fly-conformance", version: "0.0.0" });

  const updates = [];
  let onUpdate = () => {};
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updates.push(n.params.uri);
    onUpdate(n.params.uri);
  });

  try {
    await client.connect(transport);
  } catch (err) {
    report("initialize", false, { error: errorText(err) });
    process.exit(1);
  }
  const caps = client.getServerCapabilities() ?? {};
  report("initialize", Boolean(caps.resources), {
    server: client.getServerVersion(),
    capabilities: caps,
    ...(caps.resources ? {} : { error: "server does not advertise the resources capability" }),
  });

  await step("resources_list", async () => {
    const { items, pages } = await listAll((p) => client.listResources(p), "resources");
    const uris = items.map((r) => r.uri);
    const dups = [...new Set(uris.filter((u, i) => uris.indexOf(u) !== i))];
    const files = uris.filter((u) => u.startsWith("workspace:///"));
    const sorted = files.every((u, i) => i === 0 || files[i - 1] < u);
    const problems = [];
    if (dups.length) problems.push(`duplicate uris: ${dups.slice(0, 10).join(", ")}`);
    if (cfg.expectFiles !== undefined && files.length !== cfg.expectFiles) {
      problems.push(`${files.length} workspace:/// resources, want ${cfg.expectFiles}`);
    }
    if (cfg.expectFiles === undefined && files.length === 0) problems.push("no workspace:/// resources");
    if (!files.includes(PUBSPEC_URI)) problems.push(`${PUBSPEC_URI} not listed`);
    if (!files.includes(MAIN_URI)) problems.push(`${MAIN_URI} not listed`);
    return {
      ok: problems.length === 0,
      pages,
      resources: uris.length,
      workspace_files: files.length,
      sorted,
      ...(problems.length ? { error: problems.join("; ") } : {}),
    };
  });

  await step("resource_templates_list", async () => {
    const { items, pages } = await listAll((p) => client.listResourceTemplates(p), "resourceTemplates");
    const templates = items.map((t) => t.uriTemplate);
    const ok = templates.some((t) => t.startsWith("workspace:///"));
    return { ok, pages, templates, ...(ok ? {} : { error: "no workspace:/// template" }) };
  });

  let whole;
  await step("read_whole", async () => {
    const res = await client.readResource({ uri: PUBSPEC_URI });
    const c = res.contents?.[0];
    if (!c || typeof c.text !== "string" || c.text.length === 0) {
      return { ok: false, error: "contents[0].text is missing or empty" };
    }
    whole = c.text;
    return { uri: c.uri, mimeType: c.mimeType, chars: whole.length, bytes: Buffer.byteLength(whole) };
  });

  await step("read_range", async () => {
    const uri = `${PUBSPEC_URI}?start=2&length=5`;
    const res = await client.readResource({ uri });
    const c = res.contents?.[0];
    const meta = res._meta ?? {};
    const problems = [];
    if (!c) problems.push("no contents");
    for (const k of ["total", "start", "length"]) {
      if (typeof meta[k] !== "number") problems.push(`_meta.${k} is ${JSON.stringify(meta[k])}, want a number`);
    }
    if (meta.start !== undefined && meta.start !== 2) problems.push(`_meta.start = ${meta.start}, want 2`);
    if (meta.length !== undefined && meta.length !== 5) problems.push(`_meta.length = ${meta.length}, want 5`);
    if (whole !== undefined) {
      const wholeBytes = Buffer.from(whole, "utf8");
      if (meta.total !== undefined && meta.total !== wholeBytes.length) {
        problems.push(`_meta.total = ${meta.total}, want ${wholeBytes.length}`);
      }
      if (c && /^[\x00-\x7f]*$/.test(whole)) {
        const want = whole.slice(2, 7);
        if (c.text !== want) problems.push(`text = ${JSON.stringify(c.text)}, want ${JSON.stringify(want)}`);
      } else if (c) {
        const got = contentBytes(c);
        if (!got || !got.equals(wholeBytes.subarray(2, 7))) problems.push("bytes differ from whole[2:7]");
      }
    } else {
      problems.push("no whole read to compare with");
    }
    return {
      ok: problems.length === 0,
      uri,
      text: c?.text,
      _meta: res._meta,
      ...(problems.length ? { error: problems.join("; ") } : {}),
    };
  });

  await step("subscribe", async () => {
    if (!caps.resources?.subscribe) {
      return { ok: false, error: "server does not advertise resources.subscribe" };
    }
    const got = new Promise((resolve) => {
      onUpdate = (uri) => uri === MAIN_URI && resolve(true);
    });
    await client.subscribeResource({ uri: MAIN_URI });
    const started = Date.now();
    appendFileSync(cfg.touch, `\n// touched by fly conformance ${new Date().toISOString()}\n`);
    let timer;
    const timedOut = new Promise((resolve) => {
      timer = setTimeout(() => resolve(false), UPDATE_WAIT_MS);
    });
    const ok = await Promise.race([got, timedOut]);
    clearTimeout(timer);
    onUpdate = () => {};
    return {
      ok,
      uri: MAIN_URI,
      elapsed_ms: Date.now() - started,
      updates,
      ...(ok ? {} : { error: `no notifications/resources/updated for ${MAIN_URI} within ${UPDATE_WAIT_MS} ms` }),
    };
  });

  await step("read_escape", async () => {
    const results = [];
    for (const uri of ESCAPING_URIS) {
      try {
        const res = await client.readResource({ uri });
        results.push({ uri, refused: false, got: res.contents?.[0]?.text?.slice(0, 80) });
      } catch (err) {
        results.push({ uri, refused: true, error: errorText(err) });
      }
    }
    const ok = results.every((r) => r.refused);
    return { ok, results, ...(ok ? {} : { error: "an escaping uri was served" }) };
  });

  await step("close", async () => {
    const started = Date.now();
    await client.close();
    const elapsed = Date.now() - started;
    // The transport ends stdin, waits 2 s for the exit, then sends SIGTERM.
    const ok = elapsed < 1900;
    return { ok, elapsed_ms: elapsed, ...(ok ? {} : { error: "server did not exit within 2 s of stdin EOF" }) };
  });

  clearTimeout(watchdog);
  process.exit(failed ? 1 : 0);
}

main().catch((err) => {
  report("fatal", false, { error: errorText(err) });
  process.exit(1);
});
