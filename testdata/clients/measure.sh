#!/usr/bin/env bash
# What each MCP client speaks and passes to a stdio server it starts.
#
# RUN BY HAND, NEVER IN CI: it installs the real clients from npm (latest, or
# the versions you name below) and runs them. It is the source of the table
# "What each client speaks and passes" in docs/editors.md: re-run it after a
# client upgrade and update the table.
#
# For each client it configures one stdio server, recording-server.mjs (no
# env and no cwd in the client's config), makes the client start it, and
# reports (a) what the client asks for first: `server/discover` (MCP
# 2026-07-28) or `initialize` and its protocolVersion, and its clientInfo;
# (b) the names (never the values) of the environment variables the server
# received, against those of the shell that started the client; (c) the
# server's working directory. The clients run under `env -i` with a fixed,
# rich environment (FLUTTER_ROOT, JAVA_HOME, proxies, ... below) and a scratch
# HOME, so no config of yours is read or changed (npm uses its own cache),
# from a subdirectory (lib/) of a scratch Flutter project.
#
# How each one is made to start the server without an account or network:
#   claude-code  `claude mcp list` (its health check connects to each server),
#                and `claude -p` with a dummy key and a dead loopback API URL
#   gemini       `gemini mcp list` (connects; its client is "mcp-test-client"),
#                and `gemini -p` with a dummy key (the session's own client);
#                the scratch project is marked trusted in trustedFolders.json
#   codex        `codex exec`: it starts the configured servers before its first
#                model request (no login needed); the model is a dead loopback
#                provider. `codex mcp list` only prints the config.
#   inspector    `mcp-inspector --cli COMMAND --method tools/list`
#   sdk          sdk-client.mjs: @modelcontextprotocol/sdk's StdioClientTransport
#                with no env
# A client still running once its server has answered tools/list (the -p and
# exec runs keep retrying the model) is stopped.
#
# With FLY_BIN=DIR (a directory holding flyd and flyctl, e.g. from
# `go build -o DIR/ ./cmd/flyd ./cmd/flyctl`) it also runs each client against
# `flyctl mcp` through relay.mjs, with a flyd of its own (scratch socket and
# state, no TCP listener), and says which era each one ends up speaking.
#
# Usage: testdata/clients/measure.sh [OUTDIR]     (default: a new temp dir)
# Environment: CLIENTS_DIR (where npm installs, default /tmp/fly-clients),
#   CLAUDE_PKG, CODEX_PKG, GEMINI_PKG, INSPECTOR_PKG, SDK_PKG (npm specs,
#   default each package @latest), FLY_BIN (above), CLIENT_TIMEOUT (s, 60).
# Needs: Linux (setsid), git, node and npm, and the npm registry. Node 22 (node@22)
# is installed too and put first on PATH, both to install (npm picks the
# newest version whose engines match the running Node: Claude Code and the
# Inspector need Node 22) and to run the clients.
set -euo pipefail

if [ "${CI:-}" = true ]; then
	echo "measure.sh runs the real MCP clients from npm: run it by hand, not in CI" >&2
	exit 0
fi

HERE=$(cd "$(dirname "$0")" && pwd)
CLIENTS_DIR=${CLIENTS_DIR:-/tmp/fly-clients}
OUT=${1:-$(mktemp -d)}
TIMEOUT=${CLIENT_TIMEOUT:-60}
mkdir -p "$CLIENTS_DIR" "$OUT"
OUT=$(cd "$OUT" && pwd)

# --- install ---------------------------------------------------------------
install() { # NAME SPEC
	mkdir -p "$CLIENTS_DIR/$1"
	echo "installing $2 into $CLIENTS_DIR/$1" >&2
	npm install --prefix "$CLIENTS_DIR/$1" --no-fund --no-audit --loglevel=error "$2" >&2
}
install node22 node@22
NODE22_BIN=$CLIENTS_DIR/node22/node_modules/node/bin
export PATH="$NODE22_BIN:$PATH"
install claude "${CLAUDE_PKG:-@anthropic-ai/claude-code@latest}"
install codex "${CODEX_PKG:-@openai/codex@latest}"
install gemini "${GEMINI_PKG:-@google/gemini-cli@latest}"
install inspector "${INSPECTOR_PKG:-@modelcontextprotocol/inspector@latest}"
install sdk "${SDK_PKG:-@modelcontextprotocol/sdk@latest}"
version() { node -p "require('$CLIENTS_DIR/$1/node_modules/$2/package.json').version"; }
{
	echo "claude-code $(version claude @anthropic-ai/claude-code)"
	echo "codex $(version codex @openai/codex)"
	echo "gemini $(version gemini @google/gemini-cli)"
	echo "inspector $(version inspector @modelcontextprotocol/inspector)"
	echo "sdk $(version sdk @modelcontextprotocol/sdk)"
	echo "node $(node --version)"
} >"$OUT/versions.txt"

CLAUDE=$CLIENTS_DIR/claude/node_modules/.bin/claude
CODEX=$CLIENTS_DIR/codex/node_modules/.bin/codex
GEMINI=$CLIENTS_DIR/gemini/node_modules/.bin/gemini
INSPECTOR=$CLIENTS_DIR/inspector/node_modules/.bin/mcp-inspector
NODE=$(command -v node)

# --- the shell the clients start from --------------------------------------
SCRATCH=$OUT/scratch
APP=$SCRATCH/app # a Flutter project; the clients start in app/lib
mkdir -p "$SCRATCH/tmp" "$APP/lib"
printf 'name: app\n' >"$APP/pubspec.yaml"
git -C "$APP" init -q 2>/dev/null || true

# The parent environment: the usual login variables, a Flutter developer's,
# proxies (one with credentials in its URL), a certificate bundle and a
# secret-looking name. Values are dummies; only names are recorded.
PARENT_ENV=(
	HOME="$SCRATCH/home" USER="$(id -un)" LOGNAME="$(id -un)" SHELL=/bin/bash
	PATH="$NODE22_BIN:/usr/local/bin:/usr/bin:/bin" TERM=xterm-256color
	LANG=C.UTF-8 LC_ALL=C.UTF-8 TZ=UTC TMPDIR="$SCRATCH/tmp" XDG_RUNTIME_DIR="$SCRATCH/tmp"
	JAVA_HOME=/x ANDROID_HOME=/y ANDROID_SDK_ROOT=/y FLUTTER_ROOT=/z PUB_CACHE=/pub
	CHROME_EXECUTABLE=/c GRADLE_OPTS=-Dmarker=1
	HTTPS_PROXY=http://p HTTP_PROXY=http://u:pw@p NO_PROXY="localhost,127.0.0.1"
	SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt MY_API_TOKEN=t FLY_MARKER=1
)
printf '%s\n' "${PARENT_ENV[@]%%=*}" | sort >"$OUT/parent-env.txt"

# run_client NAME LOG CMD...: runs CMD from app/lib in the parent environment,
# in a process group of its own, until it exits, its server has answered
# tools/list, or TIMEOUT.
run_client() {
	local name=$1 log=$2
	shift 2
	echo "running $name" >&2
	(cd "$APP/lib" && exec setsid env -i "${PARENT_ENV[@]}" "$@") \
		>"$OUT/$name.out" 2>&1 </dev/null &
	local pid=$! i
	for ((i = 0; i < TIMEOUT * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		grep -q '"method\\":\\"tools/list' "$log" 2>/dev/null && { sleep 1; break; }
		sleep 0.1
	done
	kill -TERM -- "-$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# measure SUFFIX SCRIPT [ARG...]: every client, each configured with the
# server `node SCRIPT LOGFILE ARG...` and nothing else (no env, no cwd).
measure() {
	local sfx=$1 script=$2
	shift 2
	local extra=("$@") H="$SCRATCH/home"
	rm -rf "$H"
	mkdir -p "$H/.gemini"
	printf '{"%s": "TRUST_FOLDER"}\n' "$APP" >"$H/.gemini/trustedFolders.json"
	in_app() { (cd "$APP" && env -i "${PARENT_ENV[@]}" "$@") >/dev/null 2>&1; }
	local log

	log=$OUT/claude-code-list$sfx.log
	in_app "$CLAUDE" mcp add -s user rec -- "$NODE" "$script" "$log" "${extra[@]}"
	run_client "claude-code-list$sfx" "$log" "$CLAUDE" mcp list
	in_app "$CLAUDE" mcp remove -s user rec
	log=$OUT/claude-code-session$sfx.log
	in_app "$CLAUDE" mcp add -s user rec -- "$NODE" "$script" "$log" "${extra[@]}"
	run_client "claude-code-session$sfx" "$log" env ANTHROPIC_API_KEY=dummy \
		ANTHROPIC_BASE_URL=http://127.0.0.1:9 "$CLAUDE" -p "say hi"

	log=$OUT/gemini-list$sfx.log
	in_app "$GEMINI" mcp add -s user rec "$NODE" -- "$script" "$log" "${extra[@]}"
	run_client "gemini-list$sfx" "$log" "$GEMINI" mcp list
	in_app "$GEMINI" mcp remove -s user rec
	log=$OUT/gemini-session$sfx.log
	in_app "$GEMINI" mcp add -s user rec "$NODE" -- "$script" "$log" "${extra[@]}"
	run_client "gemini-session$sfx" "$log" env GEMINI_API_KEY=dummy "$GEMINI" -p "say hi"

	log=$OUT/codex-exec$sfx.log
	in_app "$CODEX" mcp add rec -- "$NODE" "$script" "$log" "${extra[@]}"
	run_client "codex-exec$sfx" "$log" "$CODEX" exec --skip-git-repo-check \
		-c model_provider=offline \
		-c 'model_providers.offline={name="offline",base_url="http://127.0.0.1:9/v1",wire_api="responses"}' \
		"say hi"

	log=$OUT/inspector-cli$sfx.log
	run_client "inspector-cli$sfx" "$log" "$INSPECTOR" --cli --method tools/list \
		"$NODE" "$script" "$log" "${extra[@]}"
	log=$OUT/sdk$sfx.log
	run_client "sdk$sfx" "$log" "$NODE" "$HERE/sdk-client.mjs" "$CLIENTS_DIR/sdk" \
		"$NODE" "$script" "$log" "${extra[@]}"
}

measure "" "$HERE/recording-server.mjs"

if [ -n "${FLY_BIN:-}" ]; then
	FLY=$SCRATCH/fly
	mkdir -m 700 "$FLY"
	FLYENV=(FLY_SOCKET="$FLY/flyd.sock" FLY_STATE_DIR="$FLY/state" FLY_CONFIG_DIR="$FLY/config")
	env -i HOME="$SCRATCH/home" PATH=/usr/bin:/bin "${FLYENV[@]}" \
		"$FLY_BIN/flyd" run --listen "" --upstreams - --dtd-dir - --login-env=false \
		>"$OUT/flyd.out" 2>&1 &
	FLYD_PID=$!
	trap 'kill "$FLYD_PID" 2>/dev/null || true' EXIT
	for ((i = 0; i < 100; i++)); do [ -S "$FLY/flyd.sock" ] && break; sleep 0.1; done
	measure "-fly" "$HERE/relay.mjs" "${FLYENV[@]}" "$FLY_BIN/flyctl" mcp
	kill "$FLYD_PID" 2>/dev/null || true
	wait "$FLYD_PID" 2>/dev/null || true
fi

# --- report ----------------------------------------------------------------
"$NODE" - "$OUT" <<'EOF'
const fs = require("fs"), path = require("path");
const out = process.argv[2];
const parent = fs.readFileSync(path.join(out, "parent-env.txt"), "utf8").split("\n").filter(Boolean);
console.log("versions: " + fs.readFileSync(path.join(out, "versions.txt"), "utf8").trim().split("\n").join(", "));
console.log("parent environment: " + parent.join(" "));
const key = (f) => f.replace(/-fly\.log$/, ".log~"); // each client, then its run through fly
for (const f of fs.readdirSync(out).filter((f) => f.endsWith(".log")).sort((a, b) => (key(a) < key(b) ? -1 : 1))) {
  const lines = fs.readFileSync(path.join(out, f), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const start = lines.find((l) => l.event === "start");
  console.log(`\n== ${f.replace(/\.log$/, "")}`);
  if (!start) { console.log("   the server was never started"); continue; }
  const msgs = lines.filter((l) => l.event === "recv").map((l) => { try { return JSON.parse(l.line); } catch { return {}; } });
  const sent = lines.filter((l) => l.event === "sent").map((l) => { try { return JSON.parse(l.line); } catch { return {}; } });
  const disc = msgs.find((m) => m.method === "server/discover");
  const init = msgs.find((m) => m.method === "initialize");
  if (disc) {
    const meta = disc.params?._meta ?? {};
    const ok = sent.some((s) => s.id === disc.id && s.result);
    console.log(`   asks server/discover first (${meta["io.modelcontextprotocol/protocolVersion"]}), clientInfo ${JSON.stringify(meta["io.modelcontextprotocol/clientInfo"])}` + (sent.length ? (ok ? ": answered" : ": refused") : ""));
  }
  if (init) {
    const res = sent.find((s) => s.id === init.id)?.result;
    console.log(`   initialize protocolVersion ${init.params.protocolVersion}, clientInfo ${JSON.stringify(init.params.clientInfo)}` + (res ? `; server chose ${res.protocolVersion}` : ""));
  } else if (disc) {
    console.log("   no initialize: speaks 2026-07-28");
  }
  console.log(`   methods: ${[...new Set(msgs.map((m) => m.method).filter(Boolean))].join(", ")}`);
  const env = start.env;
  console.log(`   cwd: ${start.cwd}`);
  console.log(`   env passed from the parent: ${parent.filter((n) => env.includes(n)).join(" ") || "(none)"}`);
  console.log(`   env dropped: ${parent.filter((n) => !env.includes(n)).join(" ") || "(none)"}`);
  console.log(`   env added by the client: ${env.filter((n) => !parent.includes(n)).join(" ") || "(none)"}`);
}
console.log(`\nlogs and client output: ${out}`);
EOF
