// ps1-syntax.mjs FILE... parses PowerShell scripts with tree-sitter's
// PowerShell grammar (tree-sitter-powershell, not PowerShell's own parser,
// which does not run here) and fails on any syntax error it finds. It says
// nothing of what a script does when run.
//
// FLY_NODE_DIR is where packaging/tools/package.json's packages are
// installed (packaging/release runs npm ci there).

import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.FLY_NODE_DIR ?? ".", "package.json"));
const { Parser, Language } = require("web-tree-sitter");

await Parser.init();
const lang = await Language.load(require.resolve("tree-sitter-powershell/tree-sitter-powershell.wasm"));
const parser = new Parser();
parser.setLanguage(lang);

let bad = 0;
for (const file of process.argv.slice(2)) {
  const src = fs.readFileSync(file, "utf8");
  const tree = parser.parse(src);
  const walk = (n) => {
    if (n.type === "ERROR" || n.isMissing) {
      bad++;
      const { row, column } = n.startPosition;
      const what = n.isMissing ? `missing ${n.type}` : `cannot parse ${JSON.stringify(src.slice(n.startIndex, n.startIndex + 60))}`;
      console.error(`${file}:${row + 1}:${column + 1}: ${what}`);
      return;
    }
    for (const c of n.children) walk(c);
  };
  walk(tree.rootNode);
  if (!tree.rootNode.hasError) console.log(`ps1-syntax: ${file} parses`);
}
process.exit(bad ? 1 : 0);
