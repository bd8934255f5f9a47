// mcp.mjs builds and checks what fly ships for the MCP ecosystem: fly.mcpb,
// the bundle Claude Desktop installs (packaging/mcp/manifest.json with flyd
// and flyctl for macOS and Windows), and server.json, fly's entry in the
// official MCP registry (packaging/mcp/server.json), which names the
// bundle's release URL and SHA-256. Everything is checked offline:
//
//   node mcp.mjs bundle DIST OUT VERSION   build OUT/fly.mcpb and OUT/server.json
//                                          from goreleaser's binaries in DIST,
//                                          then check them
//   node mcp.mjs check DIR                 check DIR/fly.mcpb and DIR/server.json
//
// FLY_NODE_DIR is where packaging/tools/package.json's packages are
// installed (packaging/release runs npm ci there).

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const mcpDir = path.join(here, "..", "mcp");
const nodeDir = process.env.FLY_NODE_DIR;
if (!nodeDir) fail("FLY_NODE_DIR is not set (packaging/release sets it)");
const require = createRequire(path.join(nodeDir, "package.json"));
const mcpbCLI = path.join(nodeDir, "node_modules", "@anthropic-ai", "mcpb", "dist", "cli", "cli.js");

const repo = "https://github.com/fly-dev/fly";
// The registry's rule for an MCPB package URL (registry v1.8.9,
// internal/validators/registries/mcpb.go): a GitHub release asset.
const releaseAsset = /^https:\/\/github\.com\/([a-zA-Z0-9]([a-zA-Z0-9-]{0,37}[a-zA-Z0-9])?)\/([a-zA-Z0-9._-]+)\/releases\/download\/([^/]+)\/([^/]+)$/;

function fail(msg) {
  console.error(`mcp: error: ${msg}`);
  process.exit(1);
}

function sha256(file) {
  return createHash("sha256").update(fs.readFileSync(file)).digest("hex");
}

function mcpb(...args) {
  return execFileSync(process.execPath, [mcpbCLI, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

// fill replaces @NAME@ in a template file's text.
function fill(file, values) {
  let text = fs.readFileSync(file, "utf8");
  for (const [k, v] of Object.entries(values)) text = text.replaceAll(`@${k}@`, v);
  const left = text.match(/@[A-Z0-9_]+@/);
  if (left) fail(`${file}: ${left[0]} is not filled in`);
  return text;
}

// The binaries the bundle carries, from goreleaser's artifacts.json: one
// macOS binary for both architectures, and Windows amd64 (which Windows on
// arm64 runs too). A bundle is for a platform, not an architecture.
const bundled = [
  { dir: "darwin", goos: "darwin", goarch: "all", names: ["flyd", "flyctl"] },
  { dir: "win32", goos: "windows", goarch: "amd64", names: ["flyd.exe", "flyctl.exe"] },
];

async function bundle(dist, out, version) {
  const artifacts = JSON.parse(fs.readFileSync(path.join(dist, "artifacts.json"), "utf8"));
  const stage = path.join(out, "bundle");
  fs.rmSync(stage, { recursive: true, force: true });
  for (const b of bundled) {
    fs.mkdirSync(path.join(stage, "server", b.dir), { recursive: true });
    for (const name of b.names) {
      const a = artifacts.find((a) => a.type === "Binary" && a.goos === b.goos && a.goarch === b.goarch && a.name === name);
      if (!a) fail(`${dist}/artifacts.json has no ${name} for ${b.goos}/${b.goarch}`);
      const dst = path.join(stage, "server", b.dir, name);
      fs.copyFileSync(a.path, dst);
      fs.chmodSync(dst, 0o755);
    }
  }
  fs.copyFileSync(path.join(here, "..", "..", "LICENSE"), path.join(stage, "LICENSE"));
  fs.writeFileSync(path.join(stage, "manifest.json"), fill(path.join(mcpDir, "manifest.json"), { VERSION: version }));

  const file = path.join(out, "fly.mcpb");
  fs.rmSync(file, { force: true });
  try {
    mcpb("pack", stage, file);
  } catch (e) {
    fail(`mcpb pack: ${e.stdout}${e.stderr}`);
  }
  fs.rmSync(stage, { recursive: true });

  const server = fill(path.join(mcpDir, "server.json"), { VERSION: version, SHA256: sha256(file) });
  fs.writeFileSync(path.join(out, "server.json"), server);
  await check(out);
}

// check checks DIR/fly.mcpb (its manifest with mcpb's own validator, and
// that every command it names is in the bundle, executable, and a binary
// for its platform) and DIR/server.json (against the registry's schema and
// the registry's rules for an MCPB package, with the bundle's SHA-256).
async function check(dir) {
  const file = path.join(dir, "fly.mcpb");
  const unpacked = fs.mkdtempSync(path.join(dir, ".mcpb-check-"));
  try {
    try {
      mcpb("unpack", file, unpacked);
    } catch (e) {
      fail(`mcpb unpack ${file}: ${e.stdout}${e.stderr}`);
    }
    try {
      mcpb("validate", path.join(unpacked, "manifest.json"));
    } catch (e) {
      fail(`mcpb validate: ${e.stdout}${e.stderr}`);
    }
    const manifest = JSON.parse(fs.readFileSync(path.join(unpacked, "manifest.json"), "utf8"));
    const cfg = manifest.server.mcp_config;
    const commands = { darwin: cfg.command, ...Object.fromEntries(Object.entries(cfg.platform_overrides ?? {}).map(([p, o]) => [p, o.command ?? cfg.command])) };
    for (const platform of manifest.compatibility.platforms) {
      const cmd = commands[platform];
      if (!cmd?.startsWith("${__dirname}/")) fail(`manifest: ${platform}'s command ${cmd} is not in the bundle`);
      const bin = path.join(unpacked, cmd.slice("${__dirname}/".length));
      if (!fs.existsSync(bin)) fail(`manifest: ${platform}'s command ${cmd} is not in the bundle`);
      const flyd = path.join(path.dirname(bin), platform === "win32" ? "flyd.exe" : "flyd");
      for (const f of [bin, flyd]) {
        if (!fs.existsSync(f)) fail(`${file}: no ${path.relative(unpacked, f)} (flyctl starts the flyd beside it)`);
        if (platform !== "win32" && (fs.statSync(f).mode & 0o111) === 0) fail(`${file}: ${path.relative(unpacked, f)} is not executable`);
        checkBinary(f, platform);
      }
    }
    if (!cfg.args.includes("mcp")) fail(`manifest: the command does not run flyctl mcp: ${cfg.args}`);
    await checkHostConfig(manifest, unpacked);

    const server = JSON.parse(fs.readFileSync(path.join(dir, "server.json"), "utf8"));
    checkServerJSON(server);
    const pkg = server.packages.find((p) => p.registryType === "mcpb");
    const sum = sha256(file);
    if (pkg.fileSha256 !== sum) fail(`server.json: fileSha256 ${pkg.fileSha256}, but fly.mcpb's is ${sum}`);
    if (manifest.version !== server.version) fail(`manifest.json's version ${manifest.version} is not server.json's ${server.version}`);
    console.log(`mcp: ${file} (${(fs.statSync(file).size / 1048576).toFixed(1)} MiB, ${manifest.compatibility.platforms.join(", ")}) and server.json are valid`);
  } finally {
    fs.rmSync(unpacked, { recursive: true, force: true });
  }
}

// checkHostConfig runs mcpb's own getMcpConfigForManifest, which Claude
// Desktop uses to turn a manifest and the user's settings into the command
// it starts, as on macOS and on Windows, with the required project chosen:
// the command must be flyctl in the bundle, running "flyctl mcp --workspace
// PROJECT", with no setting left unfilled and no variable set empty.
async function checkHostConfig(manifest, extensionPath) {
  const { getMcpConfigForManifest } = await import(pathToFileURL(require.resolve("@anthropic-ai/mcpb")).href);
  const real = Object.getOwnPropertyDescriptor(process, "platform");
  try {
    for (const [platform, exe] of [["darwin", "server/darwin/flyctl"], ["win32", "server/win32/flyctl.exe"]]) {
      Object.defineProperty(process, "platform", { value: platform });
      const cfg = await getMcpConfigForManifest({
        manifest,
        extensionPath,
        systemDirs: { HOME: "/home/u", DESKTOP: "/home/u/Desktop", DOCUMENTS: "/home/u/Documents", DOWNLOADS: "/home/u/Downloads" },
        userConfig: { workspace: "/home/u/my_app" },
        pathSeparator: "/",
      });
      const want = { command: path.join(extensionPath, exe), args: ["mcp", "--workspace", "/home/u/my_app"] };
      if (!cfg || cfg.command !== want.command || JSON.stringify(cfg.args) !== JSON.stringify(want.args)) {
        fail(`on ${platform}, a host would run ${JSON.stringify(cfg)}, want ${JSON.stringify(want)}`);
      }
      if (JSON.stringify(cfg).includes("${")) fail(`on ${platform}, a host would run ${JSON.stringify(cfg)}: a setting is left unfilled`);
      // flyd fills a variable the client did not pass from the user's login
      // environment; one passed empty stays empty.
      for (const [k, v] of Object.entries(cfg.env ?? {})) {
        if (v === "") fail(`on ${platform}, a host would set ${k} empty, which keeps flyd from filling it in`);
      }
    }
  } finally {
    Object.defineProperty(process, "platform", real);
  }
}

// checkBinary checks that f is an executable for platform: on macOS a
// universal Mach-O holding x86_64 and arm64, on Windows a PE file.
function checkBinary(f, platform) {
  const b = fs.readFileSync(f);
  if (platform === "win32") {
    if (b.toString("latin1", 0, 2) !== "MZ") fail(`${f} is not a Windows executable`);
    return;
  }
  if (b.readUInt32BE(0) !== 0xcafebabe) fail(`${f} is not a universal macOS binary`);
  const n = b.readUInt32BE(4);
  const cpus = new Set();
  for (let i = 0; i < n; i++) cpus.add(b.readUInt32BE(8 + 20 * i));
  // CPU_TYPE_X86_64, CPU_TYPE_ARM64
  if (!cpus.has(0x01000007) || !cpus.has(0x0100000c)) fail(`${f} does not hold both x86_64 and arm64`);
}

// checkServerJSON checks server.json against the registry's schema
// (packaging/mcp/server.schema.json) and the rules the registry applies on
// publishing that need no network.
function checkServerJSON(server) {
  const Ajv = require("ajv").default;
  const addFormats = require("ajv-formats").default;
  const schema = JSON.parse(fs.readFileSync(path.join(mcpDir, "server.schema.json"), "utf8"));
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats(ajv);
  const validate = ajv.compile(schema);
  if (!validate(server)) fail(`server.json does not match ${schema.$id}:\n${ajv.errorsText(validate.errors, { separator: "\n" })}`);
  if (server.$schema !== schema.$id) fail(`server.json's $schema is ${server.$schema}, want ${schema.$id}`);
  // The namespace io.github.<owner> is proven by that GitHub owner.
  if (!server.name.startsWith("io.github.fly-dev/")) fail(`server.json: name ${server.name} is not in fly-dev's GitHub namespace`);
  if (server.repository?.url !== repo) fail(`server.json: repository ${server.repository?.url}, want ${repo}`);
  if (server.version === "latest" || looksLikeVersionRange(server.version)) fail(`server.json: version ${server.version} is reserved or looks like a range`);
  const mcpbs = server.packages.filter((p) => p.registryType === "mcpb");
  if (mcpbs.length !== 1) fail(`server.json: ${mcpbs.length} mcpb packages, want 1`);
  for (const p of mcpbs) {
    if (!p.fileSha256) fail("server.json: an MCPB package needs fileSha256");
    if (p.registryBaseUrl) fail("server.json: an MCPB package has no registryBaseUrl");
    const m = p.identifier.match(releaseAsset);
    if (!m) fail(`server.json: ${p.identifier} is not a GitHub release asset URL`);
    if (!p.identifier.toLowerCase().includes("mcp")) fail(`server.json: ${p.identifier} must contain "mcp"`);
    if (`${m[1]}/${m[3]}` !== "fly-dev/fly" || m[4] !== `v${server.version}` || m[5] !== "fly.mcpb") {
      fail(`server.json: ${p.identifier} is not ${repo}/releases/download/v${server.version}/fly.mcpb`);
    }
    if (p.transport.type !== "stdio") fail(`server.json: transport ${p.transport.type}, want stdio`);
  }
}

// looksLikeVersionRange is the registry's (registry v1.8.9,
// internal/validators/validators.go), which refuses such a version.
function looksLikeVersionRange(version) {
  const v = version.trim();
  const ver = String.raw`v?\d+(?:\.\d+){0,3}(?:-[0-9A-Za-z.-]+)?`;
  if (new RegExp(String.raw`^\s*(?:\^|~|>=|<=|>|<|=)\s*${ver}\s*$`).test(v)) return true;
  if (new RegExp(String.raw`^\s*${ver}\s-\s*${ver}\s*$`).test(v)) return true;
  if (new RegExp(String.raw`^\s*(?:${ver}\s*)(?:\|\|\s*${ver}\s*)+$`).test(v)) return true;
  if (/^\s*(?:v?\d+|x|X|\*)(?:\.(?:\d+|x|X|\*)){1,2}(?:-[0-9A-Za-z.-]+)?\s*$/.test(v)) return /[xX*]/.test(v);
  return false;
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "bundle" && args.length === 3) await bundle(args[0], args[1], args[2]);
else if (cmd === "check" && args.length === 1) await check(args[0]);
else fail("usage: node mcp.mjs bundle DIST OUT VERSION | check DIR");
