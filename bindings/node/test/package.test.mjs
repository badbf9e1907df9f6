// The package as a user gets it: `npm pack`, then `npm install ./repo-search-*.tgz` into a fresh
// directory with nothing else, where the specification's example runs unchanged but for its
// import path, and the loader names the platform when no native module matches.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, copyFileSync, writeFileSync, readdirSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { platformKey } from "repo-search";
import { worktree } from "./helpers.mjs";

const pkg = fileURLToPath(new URL("..", import.meta.url));

function npm(args, cwd) {
  return execFileSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], { cwd, encoding: "utf8" });
}

test("the packed tarball installs into a fresh directory and runs the specification's example", () => {
  const out = mkdtempSync(path.join(tmpdir(), "repo-search-pack-"));
  const packed = JSON.parse(npm(["pack", "--json", "--pack-destination", out], pkg));
  const files = packed[0].files.map((f) => f.path).sort();
  assert.ok(files.includes(`native/repo-search.${platformKey()}.node`), files.join());
  for (const f of ["index.js", "index.d.ts", "agent.js", "agent.d.ts", "package.json", "README.md"]) {
    assert.ok(files.includes(f), `${f} is not in the tarball`);
  }
  assert.ok(!files.some((f) => f.startsWith("test/") || f.startsWith("node_modules/")), files.join());

  const app = mkdtempSync(path.join(tmpdir(), "repo-search-app-"));
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  npm(["install", "--offline", path.join(out, packed[0].filename)], app);
  copyFileSync(path.join(pkg, "test/fixtures/spec-example.mjs"), path.join(app, "example.mjs"));
  const cwd = worktree({ "src/lib.rs": "pub fn parse() {}\n" });
  const result = JSON.parse(execFileSync("node", ["example.mjs", cwd], { cwd: app, encoding: "utf8" }));
  assert.deepEqual(result, { literal: ["src/lib.rs"], semantic: ["src/lib.rs"], untrusted: true });

  // No module for this platform: the loader says which platform, and what the package holds.
  const native = path.join(app, "node_modules/repo-search/native");
  for (const f of readdirSync(native)) renameSync(path.join(native, f), path.join(native, f.replace(platformKey(), "elsewhere-x64")));
  let message = "";
  try {
    execFileSync("node", ["example.mjs", cwd], { cwd: app, encoding: "utf8", stdio: "pipe" });
  } catch (e) {
    message = e.stderr;
  }
  assert.ok(message.includes(`no native module for this platform (${platformKey()})`), message);
  assert.ok(message.includes("this package holds one for elsewhere-x64"), message);
});
