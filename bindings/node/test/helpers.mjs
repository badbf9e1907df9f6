// Shared by the package's tests: a worktree to search, and a JavaScript backend whose every
// answer can be made a lie.

import { execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** A fresh git worktree holding `files` (`{ "a.rs": "text" }`), canonical. */
export function worktree(files = { "src/lib.rs": "pub fn parse() {}\n" }) {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), "repo-search-node-")));
  execFileSync("git", ["init", "-q", dir]);
  for (const [name, text] of Object.entries(files)) {
    const file = path.join(dir, name);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  return dir;
}

/** The ripgrep that `cargo xtask tools` installs: the peer the answers are compared with. */
export function rg() {
  const rg = process.env.REPO_SEARCH_RG;
  if (!rg) throw new Error("REPO_SEARCH_RG is not set: run the tests with `cargo xtask node`");
  return rg;
}

/** `rg -l` for a fixed string, as sorted repo-relative paths. */
export function rgFiles(dir, query, extra = []) {
  let out = "";
  try {
    out = execFileSync(rg(), ["-l", "--fixed-strings", ...extra, "--", query, "."], {
      cwd: dir,
      encoding: "utf8",
    });
  } catch (e) {
    if (e.status !== 1) throw e;
  }
  return out
    .split("\n")
    .filter(Boolean)
    .map((p) => p.replace(/^\.\//, ""))
    .sort();
}

/**
 * A backend that answers as told. `answer(request)` gives the search answer; `status()` the
 * status; every call is recorded in `calls`.
 */
export function backend(overrides = {}) {
  const calls = [];
  const b = {
    capabilities: { semantic: false },
    calls,
    async update(request) {
      calls.push(["update", request]);
    },
    async remove(request) {
      calls.push(["remove", request]);
    },
    async status() {
      calls.push(["status"]);
      return { state: "ready", sourceRevision: "rev-1", updatedAt: Date.now() };
    },
    async search(request) {
      calls.push(["search", request]);
      return { hits: [{ path: "src/lib.rs", line: 1, column: 8, snippet: "pub fn parse() {}", score: 0.9 }] };
    },
    async dispose() {
      calls.push(["dispose"]);
    },
    ...overrides,
  };
  return b;
}

/** A hit with defaults. */
export function hit(fields = {}) {
  return { path: "src/lib.rs", line: 1, column: 1, snippet: "pub fn parse() {}", score: 0.5, ...fields };
}
