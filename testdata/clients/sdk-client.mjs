// The official TypeScript SDK's stdio client (@modelcontextprotocol/sdk 1.x)
// as an application uses it: StdioClientTransport with no env and no cwd.
// Part of measure.sh, run by hand.
// Usage: node sdk-client.mjs PREFIX COMMAND [ARG...], where PREFIX is the
// `npm install --prefix` directory that holds @modelcontextprotocol/sdk.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [prefix, command, ...args] = process.argv.slice(2);
const require = createRequire(join(prefix, "package.json"));
const load = (spec) => import(pathToFileURL(require.resolve(spec)).href);
const { Client } = await load("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = await load("@modelcontextprotocol/sdk/client/stdio.js");
const pkg = join(prefix, "node_modules/@modelcontextprotocol/sdk/package.json");
const { version } = JSON.parse(readFileSync(pkg, "utf8"));

const client = new Client({ name: "sdk-stdio-client", version });
await client.connect(new StdioClientTransport({ command, args }));
const { tools } = await client.listTools();
console.log(`@modelcontextprotocol/sdk ${version}: connected, ${tools.length} tools`);
await client.close();
