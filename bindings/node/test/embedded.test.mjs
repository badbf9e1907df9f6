// The embedded index through the binding: the same files as ripgrep, fresh after every write,
// and any number of parallel callers (async tasks and worker threads) with zero failures.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, writeFileSync, renameSync, rmSync } from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";

import {
  createEmbeddedIndex,
  createGitAwareRepositoryOperations,
  createIndexedRepositoryOperations,
  createRepoSearchTool,
} from "repo-search/agent";
import { rgFiles, worktree } from "./helpers.mjs";

const WORDS = ["alpha", "beta", "gamma", "delta", "parse_config", "Render", "tokio::spawn", "unsafe {"];

// A tree of 400 files in nested directories, with an ignored directory and a hidden file that
// ripgrep's default selection leaves out.
function generatedTree() {
  const files = { ".gitignore": "target/\n", ".hidden.rs": "alpha hidden\n", "target/out.rs": "alpha ignored\n" };
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  for (let i = 0; i < 400; i++) {
    const lines = [];
    for (let l = 0; l < 20; l++) {
      lines.push(`line ${l} ${WORDS[next() % WORDS.length]} ${next() % 1000} ${i % 7 === 0 ? "rare_token_" + (i % 3) : ""}`);
    }
    const ext = ["rs", "py", "md", "c"][i % 4];
    files[`dir_${i % 9}/sub_${i % 4}/file_${i}.${ext}`] = lines.join("\n") + "\n";
  }
  return worktree(files);
}

const cwd = generatedTree();
const fallback = createGitAwareRepositoryOperations(cwd);
const operations = createIndexedRepositoryOperations(cwd, {
  index: createEmbeddedIndex(cwd),
  fallback,
  allowedModes: ["literal", "indexed_literal"],
});

async function indexedFiles(query, extra = {}) {
  const r = await operations.search({ query, mode: "indexed_literal", maxResults: 1000, ...extra });
  assert.equal(r.complete, true);
  assert.equal(r.untrusted_index, true);
  return r.hits.map((h) => h.path).sort();
}

test("indexed_literal finds the files rg -l finds", async () => {
  for (const query of [...WORDS, "rare_token_1", "line 19", "no such text anywhere", "é"]) {
    assert.deepEqual(await indexedFiles(query), rgFiles(cwd, query), query);
    const literal = await fallback.search({ query, output: "files", maxResults: 1000 });
    assert.equal(literal.complete, true);
    assert.deepEqual([...new Set(literal.hits.map((h) => h.path))].sort(), rgFiles(cwd, query), `literal ${query}`);
  }
  assert.deepEqual(await indexedFiles("ALPHA", { caseInsensitive: true }), rgFiles(cwd, "ALPHA", ["-i"]));
  assert.deepEqual(await indexedFiles("alpha", { path: "dir_3" }), rgFiles(path.join(cwd, "dir_3"), "alpha").map((p) => `dir_3/${p}`));
  assert.deepEqual(await indexedFiles("alpha", { type: ["py"] }), rgFiles(cwd, "alpha", ["-t", "py"]));
  assert.deepEqual(await indexedFiles("alpha", { includeHidden: true }), rgFiles(cwd, "alpha", ["--hidden"]));
  assert.deepEqual(await indexedFiles("alpha", { includeIgnored: true }), rgFiles(cwd, "alpha", ["--no-ignore"]));
  // A match across a line break, as `rg -U` finds it.
  const spanning = rgFiles(cwd, "rare_token_1\nline 1", ["-U"]);
  assert.ok(spanning.length > 0);
  assert.deepEqual(await indexedFiles("rare_token_1\nline 1", { multiline: true }), spanning);
  const literal = await fallback.search({ query: "rare_token_1\nline 1", multiline: true, output: "files", maxResults: 1000 });
  assert.deepEqual(literal.hits.map((h) => h.path).sort(), spanning);
});

test("every answer sees the worktree as it is now", async () => {
  const file = path.join(cwd, "dir_1/fresh.rs");
  writeFileSync(file, "fn just_written_token() {}\n");
  assert.deepEqual(await indexedFiles("just_written_token"), ["dir_1/fresh.rs"]);
  renameSync(file, path.join(cwd, "dir_2/moved.rs"));
  assert.deepEqual(await indexedFiles("just_written_token"), ["dir_2/moved.rs"]);
  writeFileSync(path.join(cwd, "dir_2/moved.rs"), "fn changed_token() {}\n");
  assert.deepEqual(await indexedFiles("just_written_token"), []);
  assert.deepEqual(await indexedFiles("changed_token"), ["dir_2/moved.rs"]);
  rmSync(path.join(cwd, "dir_2/moved.rs"));
  assert.deepEqual(await indexedFiles("changed_token"), []);
  const status = await operations.index.status();
  assert.equal(status.state, "ready");
  assert.match(status.sourceRevision, /\+g\d+$/);
});

test("a watching index answers as fresh", async () => {
  const dir = worktree({ "a.rs": "one\n" });
  const ops = createIndexedRepositoryOperations(dir, {
    index: createEmbeddedIndex(dir, { watch: true }),
    allowedModes: ["literal", "indexed_literal"],
  });
  assert.deepEqual((await ops.search({ query: "one", mode: "indexed_literal" })).hits.map((h) => h.path), ["a.rs"]);
  for (let i = 0; i < 20; i++) {
    writeFileSync(path.join(dir, `w${i}.rs`), `watched_${i}\n`);
    const r = await ops.search({ query: `watched_${i}`, mode: "indexed_literal" });
    assert.deepEqual(r.hits.map((h) => h.path), [`w${i}.rs`], `write ${i}`);
  }
});

test("parallel async callers: zero failures, the same answers", async () => {
  const tool = createRepoSearchTool(cwd, { operations, modes: ["literal", "indexed_literal"] });
  const expected = rgFiles(cwd, "gamma");
  const calls = Array.from({ length: 200 }, (_, i) =>
    i % 3 === 0
      ? tool.execute({ query: "gamma", mode: "indexed_literal", max_results: 1000 })
      : operations.search({ query: "gamma", mode: i % 2 ? "indexed_literal" : "literal", maxResults: 1000 }),
  );
  const results = await Promise.allSettled(calls);
  const failed = results.filter((r) => r.status === "rejected");
  assert.deepEqual(failed.map((r) => `${r.reason.code}: ${r.reason.message}`), []);
  for (const r of results) {
    assert.deepEqual([...new Set(r.value.hits.map((h) => h.path))].sort(), expected);
  }
});

test("worker threads, each with its own index handle on one worktree: zero failures", async () => {
  const expected = rgFiles(cwd, "delta");
  const worker = new URL("./worker.mjs", import.meta.url);
  const runs = await Promise.all(
    Array.from(
      { length: 4 },
      (_, i) =>
        new Promise((resolve, reject) => {
          const w = new Worker(worker, { workerData: { cwd, query: "delta", queries: 25, writer: i === 0 } });
          w.once("message", resolve);
          w.once("error", reject);
        }),
    ),
  );
  for (const run of runs) {
    assert.deepEqual(run.failures, []);
    assert.equal(run.answers.length, 25);
    for (const answer of run.answers) assert.deepEqual(answer, expected);
  }
});

test("semantic through the binding, where the model is", async () => {
  const modelDir = process.env.REPO_SEARCH_TEST_MODEL_DIR;
  assert.ok(modelDir, "REPO_SEARCH_TEST_MODEL_DIR is not set: run the tests with `cargo xtask node`");
  const dir = worktree({
    "src/config.rs": "/// Reads the settings file and parses each key and value.\npub fn load_settings(path: &Path) -> Settings { parse_toml(read(path)) }\n",
    "src/net.rs": "/// Opens a TCP socket to the server and retries on failure.\npub fn connect(addr: &str) -> Stream { retry(|| dial(addr)) }\n",
    "src/draw.rs": "/// Paints the widgets onto the screen buffer.\npub fn render(frame: &mut Frame) { for w in widgets() { w.paint(frame) } }\n",
  });
  const ops = createIndexedRepositoryOperations(dir, {
    index: createEmbeddedIndex(dir, { modelDir, rerank: "never" }),
    allowedModes: ["literal", "indexed_literal", "semantic"],
  });
  const r = await ops.search({ query: "read the configuration file", mode: "semantic", maxResults: 3 });
  assert.equal(r.untrusted_index, true);
  assert.equal(r.indexed.mode, "semantic");
  assert.equal(r.hits[0].path, "src/config.rs");
  const tool = createRepoSearchTool(dir, { operations: ops, modes: ["semantic", "literal"] });
  assert.deepEqual(tool.inputSchema.properties.mode.enum, ["semantic", "literal"]);

  // A fresh home with an empty cache and no model directory: the built-in static model serves
  // semantic, and `semantic: false` turns it off.
  const saved = { cache: process.env.XDG_CACHE_HOME, model: process.env.REPO_SEARCH_MODEL_DIR, home: process.env.HOME };
  process.env.XDG_CACHE_HOME = worktree({});
  process.env.HOME = process.env.XDG_CACHE_HOME;
  delete process.env.REPO_SEARCH_MODEL_DIR;
  try {
    const builtin = createIndexedRepositoryOperations(dir, {
      index: createEmbeddedIndex(dir),
      allowedModes: ["semantic"],
    });
    const b = await builtin.search({ query: "read the configuration file", mode: "semantic", maxResults: 3 });
    assert.equal(b.indexed.mode, "semantic");
    assert.equal(b.hits[0].path, "src/config.rs");
    // A model directory whose own static model is not whole: asked for, semantic is refused
    // with what to do, never silently dropped.
    const broken = worktree({ "static-256.bin": "not a model" });
    assert.throws(
      () => createEmbeddedIndex(dir, { modelDir: broken, semantic: true }),
      (e) => e.code === "ERR_PRISM_INDEX_UNSUPPORTED" && /built-in model/.test(e.message),
    );
    const plain = createEmbeddedIndex(dir, { semantic: false });
    assert.throws(
      () => createIndexedRepositoryOperations(dir, { index: plain, allowedModes: ["semantic"] }),
      (e) => e.code === "ERR_PRISM_INDEX_UNSUPPORTED",
    );
  } finally {
    for (const [k, v] of [["XDG_CACHE_HOME", saved.cache], ["REPO_SEARCH_MODEL_DIR", saved.model], ["HOME", saved.home]]) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test("a watching index refuses a semantic call as building while its store is first built, and builds on", async () => {
  const files = {
    "src/net.rs": "/// Opens a TCP socket to the server and retries on failure.\npub fn connect(addr: &str) -> Stream { retry(|| dial(addr)) }\n",
  };
  // Enough code that no build of the store fits in the host's deadline of 1 ms.
  for (let i = 0; i < 300; i++) {
    files[`src/handlers/h${i}.py`] = `def handle_${i}(request):\n    total = request.count * ${i}\n    return total\n`;
  }
  const dir = worktree(files);
  const query = { query: "open a socket to the server", mode: "semantic", maxResults: 3 };
  const ops = createIndexedRepositoryOperations(dir, {
    index: createEmbeddedIndex(dir, { watch: true, deadlineMs: 1 }),
    allowedModes: ["semantic"],
  });
  // The facade's own deadline is the default; the host waits for its store at most 1 ms, then
  // reports the state `building`, which the facade refuses as stale.
  await assert.rejects(ops.search(query), (e) => e.code === "ERR_PRISM_INDEX_STALE" && /building/.test(e.message));
  // The store's manifest is committed at the end of its build, by the host alone.
  const manifest = path.join(dir, ".git/repo-search/semantic/MANIFEST");
  const started = Date.now();
  while (!existsSync(manifest)) {
    assert.ok(Date.now() - started < 60000, "the host did not go on building the store");
    await new Promise((r) => setTimeout(r, 20));
  }
  const later = createIndexedRepositoryOperations(dir, { index: createEmbeddedIndex(dir), allowedModes: ["semantic"] });
  assert.equal((await later.search(query)).hits[0].path, "src/net.rs");
});

test("from a directory inside the worktree, every mode names files from the worktree's root", async () => {
  const sub = path.join(cwd, "dir_4");
  const ops = createIndexedRepositoryOperations(sub, {
    index: createEmbeddedIndex(sub),
    fallback: createGitAwareRepositoryOperations(sub),
    allowedModes: ["literal", "indexed_literal"],
  });
  const indexed = await ops.search({ query: "beta", mode: "indexed_literal", path: "dir_4", maxResults: 1000 });
  const literal = await ops.search({ query: "beta", path: "dir_4", output: "files", maxResults: 1000 });
  const expected = rgFiles(sub, "beta").map((p) => `dir_4/${p}`);
  assert.ok(expected.length > 0);
  assert.deepEqual(indexed.hits.map((h) => h.path).sort(), expected);
  assert.deepEqual(literal.hits.map((h) => h.path).sort(), expected);
  assert.equal(createRepoSearchTool(sub, { operations: ops }).name, "repo_search");
});
