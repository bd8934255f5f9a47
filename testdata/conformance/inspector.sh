#!/usr/bin/env bash
# Conformance check of an MCP stdio server (normally `flyctl mcp`) with the
# unmodified MCP Inspector CLI (@modelcontextprotocol/inspector, --cli mode),
# plus its connection CLI mcpdo for resources/subscribe, which --cli lacks.
#
# Run `npm ci` in this directory first. The inspector needs Node >= 22.19;
# npm ci installs Node 22 into node_modules/.bin, which this script puts first
# on PATH, so the system Node may be older.
#
# Environment (the same contract as client.mjs):
#   FLY_CONF_COMMAND       executable of the server (required)
#   FLY_CONF_ARGS          JSON array of its arguments (default [])
#   FLY_CONF_CWD           working directory of the server (default: ours)
#   FLY_CONF_EXPECT_FILES  number of workspace:/// resources to expect
#                          (optional; without it, at least one)
#   FLY_CONF_TOUCH         absolute path of the workspace's lib/main.dart; if
#                          set, the subscribe step appends to it
#   FLY_CONF_PASS_ENV      extra variable names, space separated, to pass to
#                          the server besides FLY_* (optional)
#
# The inspector starts the server with a minimal environment (HOME, PATH,
# USER, ...). This script adds every FLY_* variable except FLY_CONF_*, and
# the names in FLY_CONF_PASS_ENV, with -e, as a user would in a client config.
#
# Each step prints one JSON line {"step": ..., "ok": true|false, ...} on
# stdout. The exit status is 1 if any step failed, 2 on a usage error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="$here/node_modules/.bin:$PATH"
cd "$here"

usage() {
	echo "inspector.sh: $*" >&2
	exit 2
}

[[ -n ${FLY_CONF_COMMAND:-} ]] || usage "FLY_CONF_COMMAND is not set"
[[ -x node_modules/.bin/mcp-inspector ]] || usage "run npm ci in $here first"
if [[ -n ${FLY_CONF_EXPECT_FILES:-} && ! ${FLY_CONF_EXPECT_FILES} =~ ^[0-9]+$ ]]; then
	usage "FLY_CONF_EXPECT_FILES must be a non-negative integer"
fi

server_args=()
if [[ -n ${FLY_CONF_ARGS:-} ]]; then
	mapfile -d '' server_args < <(node -e '
		const a = JSON.parse(process.env.FLY_CONF_ARGS);
		if (!Array.isArray(a) || !a.every((s) => typeof s === "string" && !s.includes("\0"))) process.exit(1);
		for (const s of a) process.stdout.write(s + "\0");
	') || usage "FLY_CONF_ARGS must be a JSON array of strings"
fi

# Options shared by the inspector and mcpdo: the server's environment and cwd.
server_opts=()
while IFS= read -r name; do
	[[ $name == FLY_CONF_* ]] && continue
	server_opts+=(-e "$name=${!name}")
done < <(compgen -e | grep '^FLY_' || true)
for name in ${FLY_CONF_PASS_ENV:-}; do
	if [[ -n ${!name+set} ]]; then
		server_opts+=(-e "$name=${!name}")
	fi
done
if [[ -n ${FLY_CONF_CWD:-} ]]; then
	server_opts+=(--cwd "$FLY_CONF_CWD")
fi

failed=0
tmp=$(mktemp -d)
cleanup() {
	if [[ -n ${MCP_INSPECTOR_DAEMON_DIR:-} ]]; then
		mcpdo daemon stop >/dev/null 2>&1 || true
		rm -rf "$MCP_INSPECTOR_DAEMON_DIR"
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# report STEP OK JSON-FIELDS prints one result line.
report() {
	local fields=${3:-}
	[[ $2 == true ]] || failed=1
	printf '{"step":"%s","ok":%s%s}\n' "$1" "$2" "${fields:+,$fields}"
}

# inspect STEP OUT ARGS... runs one inspector --cli call, its JSON on OUT.
# It returns the inspector's exit status.
inspect() {
	local step=$1 out=$2
	shift 2
	local rc=0
	npx --no-install @modelcontextprotocol/inspector --cli --format json \
		"$@" "${server_opts[@]}" -- "$FLY_CONF_COMMAND" "${server_args[@]}" \
		>"$out" 2>"$tmp/$step.err" || rc=$?
	if [[ $rc -ne 0 ]]; then
		echo "inspector.sh: $step: inspector exited $rc" >&2
		cat "$tmp/$step.err" >&2
	fi
	return $rc
}

# check STEP FILE JS evaluates JS with r = the parsed JSON of FILE, and
# prints the step's line. JS returns {ok, ...fields}; a throw is a failure.
check() {
	local line
	line=$(STEP=$1 FILE=$2 node -e '
		const { readFileSync } = require("node:fs");
		let res;
		try {
			const r = JSON.parse(readFileSync(process.env.FILE, "utf8"));
			res = new Function("r", "require", process.argv[1])(r, require);
		} catch (err) {
			res = { ok: false, error: String((err && err.message) || err) };
		}
		const { ok = true, ...fields } = res;
		console.log(JSON.stringify({ step: process.env.STEP, ok: Boolean(ok), ...fields }));
	' "$3")
	printf '%s\n' "$line"
	[[ $line == *'"ok":true'* ]] || failed=1
}

version=$(npx --no-install @modelcontextprotocol/inspector --version 2>/dev/null | tail -n1)
report version true "\"inspector\":\"$version\",\"node\":\"$(node --version)\""

if inspect resources_list "$tmp/list.json" --method resources/list; then
	check resources_list "$tmp/list.json" '
		const uris = r.result.resources.map((x) => x.uri);
		const dups = [...new Set(uris.filter((u, i) => uris.indexOf(u) !== i))];
		const files = uris.filter((u) => u.startsWith("workspace:///"));
		const want = process.env.FLY_CONF_EXPECT_FILES;
		const problems = [];
		if (dups.length) problems.push(`duplicate uris: ${dups.slice(0, 10).join(", ")}`);
		if (want !== undefined && want !== "" && files.length !== Number(want)) {
			problems.push(`${files.length} workspace:/// resources, want ${want}`);
		}
		if (files.length === 0) problems.push("no workspace:/// resources");
		if (!files.includes("workspace:///pubspec.yaml")) problems.push("workspace:///pubspec.yaml not listed");
		return { ok: problems.length === 0, resources: uris.length, workspace_files: files.length,
			...(problems.length ? { error: problems.join("; ") } : {}) };
	'
else
	report resources_list false "\"error\":\"inspector failed\""
fi

if inspect resource_templates_list "$tmp/templates.json" --method resources/templates/list; then
	check resource_templates_list "$tmp/templates.json" '
		const templates = r.result.resourceTemplates.map((t) => t.uriTemplate);
		const ok = templates.some((t) => t.startsWith("workspace:///"));
		return { ok, templates, ...(ok ? {} : { error: "no workspace:/// template" }) };
	'
else
	report resource_templates_list false "\"error\":\"inspector failed\""
fi

if inspect read_whole "$tmp/whole.json" --method resources/read --uri workspace:///pubspec.yaml; then
	check read_whole "$tmp/whole.json" '
		const text = r.result.contents[0].text;
		const ok = typeof text === "string" && text.length > 0;
		return { ok, bytes: Buffer.byteLength(text ?? ""), ...(ok ? {} : { error: "contents[0].text is missing or empty" }) };
	'
else
	report read_whole false "\"error\":\"inspector failed\""
fi

if inspect read_range "$tmp/range.json" --method resources/read --uri 'workspace:///pubspec.yaml?start=2&length=5'; then
	WHOLE=$tmp/whole.json check read_range "$tmp/range.json" '
		const whole = JSON.parse(require("node:fs").readFileSync(process.env.WHOLE, "utf8")).result.contents[0].text;
		const text = r.result.contents[0].text;
		const meta = r.result._meta ?? {};
		const wholeBytes = Buffer.from(whole, "utf8");
		const problems = [];
		for (const [k, v] of [["total", wholeBytes.length], ["start", 2], ["length", 5]]) {
			if (meta[k] !== v) problems.push(`_meta.${k} = ${JSON.stringify(meta[k])}, want ${v}`);
		}
		const got = typeof text === "string" ? Buffer.from(text, "utf8") : Buffer.from(r.result.contents[0].blob ?? "", "base64");
		if (!got.equals(wholeBytes.subarray(2, 7))) {
			problems.push(`content = ${JSON.stringify(got.toString())}, want ${JSON.stringify(wholeBytes.subarray(2, 7).toString())}`);
		}
		return { ok: problems.length === 0, text, _meta: r.result._meta,
			...(problems.length ? { error: problems.join("; ") } : {}) };
	'
else
	report read_range false "\"error\":\"inspector failed\""
fi

# ../ ten times reaches /etc/passwd from a root at any depth up to 10, so a
# server that joins paths naively serves it instead of failing.
escape_uri=workspace:///$(printf '../%.0s' {1..10})etc/passwd
if [[ ! -s $tmp/whole.json ]]; then
	report read_escape false '"error":"skipped: the server never answered a read"'
elif inspect read_escape "$tmp/escape.json" --method resources/read --uri "$escape_uri" 2>/dev/null; then
	report read_escape false "\"error\":\"$escape_uri was served\""
else
	# The inspector writes its error envelope as the last JSON line on stderr.
	grep '^{"error"' "$tmp/read_escape.err" | tail -n1 >"$tmp/escape.json" || true
	check read_escape "$tmp/escape.json" '
		const ok = r.error !== undefined && r.result === undefined;
		return { ok, error_message: r.error?.message, ...(ok ? {} : { error: "no error envelope" }) };
	'
fi

# mcpdo keeps a connection in a daemon of its own; `mcpdo private` makes one
# for this run only, and the MCP_* variables keep its files in $tmp.
subscribe() {
	local uri=workspace:///lib/main.dart
	eval "$(mcpdo private)"
	export MCP_STORAGE_DIR=$tmp/mcp MCP_CATALOG_PATH=$tmp/mcp/mcp.json
	export MCP_CLIENT_CONFIG_PATH=$tmp/mcp/client.json
	export MCP_INSPECTOR_SECRET_STORE=file MCP_INSPECTOR_SECRET_FILE=$tmp/mcp/secrets.json
	if ! mcpdo --format json connect --connection fly "${server_opts[@]}" -- \
		"$FLY_CONF_COMMAND" "${server_args[@]}" >"$tmp/connect.json" 2>"$tmp/connect.err"; then
		cat "$tmp/connect.err" >&2
		report subscribe false "\"error\":\"mcpdo connect failed\""
		return
	fi
	mcpdo --format json --connection fly resources/subscribe "$uri" >"$tmp/sub.out" 2>"$tmp/sub.err" &
	local pid=$! i
	for ((i = 0; i < 100; i++)); do
		grep -q '"subscribed"' "$tmp/sub.out" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	printf '\n// touched by fly conformance %s\n' "$(date -u +%FT%TZ)" >>"$FLY_CONF_TOUCH"
	local ok=false
	for ((i = 0; i < 100; i++)); do
		if grep -q '"resources/updated"' "$tmp/sub.out"; then
			ok=true
			break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -INT "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	if [[ $ok == true ]]; then
		report subscribe true "\"uri\":\"$uri\""
	else
		cat "$tmp/sub.err" >&2
		report subscribe false "\"uri\":\"$uri\",\"error\":\"no resources/updated within 10 s\""
	fi
}
if [[ -n ${FLY_CONF_TOUCH:-} ]]; then
	subscribe
fi

exit $failed
