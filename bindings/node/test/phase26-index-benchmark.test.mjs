// The specification's scale evidence, through the binding as a TypeScript host would run it: a
// 100 000-file metadata fixture (a JavaScript backend) behind the Rust facade; indexed query
// p95 <= 250 ms; a 1000-file batch update <= 1 s; peak heap <= +64 MiB by
// process.memoryUsage(); a semantic query bounded by its deadline and its cap; and the literal
// baseline unchanged by the index.
//
// Timing is noisy on a shared 2-core machine, so a missed timing bar is measured again (up to
// three runs); the bars never move, and the correctness checks are never retried.

import { test } from "node:test";
import assert from "node:assert/strict";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

import {
  createGitAwareRepositoryOperations,
  createIndexedRepositoryOperations,
  IndexError,
} from "repo-search/agent";
import { worktree } from "./helpers.mjs";

const FILES = 100_000;
const QUERIES = 200;

// A full collection before each baseline, so that the heap figure is what the run holds.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc");

/** Metadata of `n` files: each has its item, its module and its language as tokens. */
class MetadataFixture {
  constructor(n) {
    this.postings = new Map();
    this.tokens = new Map();
    this.revision = "rev-0";
    this.updatedAt = Date.now();
    for (let j = 0; j < n; j++) this.put(`src/mod_${Math.floor(j / 100)}/file_${j}.rs`, j);
    this.capabilities = { semantic: false };
  }
  put(path, j) {
    const tokens = [`item_${j}`, `mod_${Math.floor(j / 100)}`, j % 2 ? "lang_rs" : "lang_c"];
    this.drop(path);
    this.tokens.set(path, tokens);
    for (const t of tokens) {
      if (!this.postings.has(t)) this.postings.set(t, new Set());
      this.postings.get(t).add(path);
    }
  }
  drop(path) {
    for (const t of this.tokens.get(path) ?? []) this.postings.get(t).delete(path);
    this.tokens.delete(path);
  }
  get size() {
    return this.tokens.size;
  }
  status() {
    return { state: "ready", sourceRevision: this.revision, updatedAt: this.updatedAt };
  }
  async search({ query, path, maxResults }) {
    const hits = [];
    let complete = true;
    for (const file of this.postings.get(query) ?? []) {
      if (path && !file.startsWith(`${path}/`)) continue;
      if (hits.length === maxResults) {
        complete = false;
        break;
      }
      hits.push({ path: file, line: 1, column: 1, snippet: `${query} ${file}`, score: 1 / (1 + hits.length) });
    }
    return { hits, complete, status: this.status() };
  }
  async update({ sourceRevision, changes }) {
    for (const c of changes) this.put(c.path, Number(/\d+/.exec(c.path.split("/").pop())[0]));
    this.revision = sourceRevision;
    this.updatedAt = Date.now();
  }
  async remove({ paths }) {
    for (const p of paths) this.drop(p);
  }
  async dispose() {}
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.round((sorted.length - 1) * p))];
}

async function run() {
  const cwd = worktree(
    Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`src/m${i % 20}/f${i}.rs`, `fn item_${i}() { lang_rs }\n`])),
  );
  const fallback = createGitAwareRepositoryOperations(cwd);
  const literalBefore = await fallback.search({ query: "lang_rs", maxResults: 1000 });

  const fixture = new MetadataFixture(FILES);
  const operations = createIndexedRepositoryOperations(cwd, {
    index: fixture,
    fallback,
    allowedModes: ["literal", "indexed_literal"],
  });
  gc();
  const baseline = process.memoryUsage().heapUsed;
  let peak = baseline;
  const sample = () => (peak = Math.max(peak, process.memoryUsage().heapUsed));

  const latencies = [];
  for (let q = 0; q < QUERIES; q++) {
    const request = [
      { query: `item_${(q * 7919) % FILES}` },
      { query: `mod_${q % (FILES / 100)}` },
      { query: "lang_rs" },
      { query: "lang_c", path: `src/mod_${q % (FILES / 100)}` },
    ][q % 4];
    const started = performance.now();
    const result = await operations.search({ mode: "indexed_literal", maxResults: 1000, ...request });
    latencies.push(performance.now() - started);
    sample();
    assert.ok(result.hits.length > 0, `an indexed query found nothing: ${JSON.stringify(request)}`);
  }
  latencies.sort((a, b) => a - b);

  const existing = (i) => {
    const j = (i * 97) % FILES;
    return `src/mod_${Math.floor(j / 100)}/file_${j}.rs`;
  };
  const changes = Array.from({ length: 1000 }, (_, i) => {
    switch (i % 10) {
      case 4:
      case 5:
        return { kind: "add", path: `src/new/file_${FILES + i}.rs` };
      case 6:
        return { kind: "rename", oldPath: existing(i), path: `src/moved/file_${FILES + i}.rs` };
      case 7:
        return { kind: "delete", path: existing(i) };
      default:
        return { kind: "edit", path: existing(i) };
    }
  });
  const before = fixture.size;
  let started = performance.now();
  await operations.index.update({ repositoryId: "scale", worktreeId: "main", sourceRevision: "rev-1", changes });
  const updateMs = performance.now() - started;
  sample();
  // 600 edits, 200 adds, 100 renames (net zero) and 100 deletes: net +100 files.
  assert.equal(fixture.size, before + 100, "the batch update did not apply as routed");
  assert.equal((await operations.index.status()).sourceRevision, "rev-1");

  // Semantic stays bounded: a backend that never answers, and one that floods.
  const semantic = (search) =>
    createIndexedRepositoryOperations(cwd, {
      index: { capabilities: { semantic: true }, search, status: () => fixture.status(), update() {}, remove() {}, dispose() {} },
      fallback,
      allowedModes: ["literal", "semantic"],
    });
  started = performance.now();
  let code;
  try {
    await semantic(() => new Promise(() => {})).search({ mode: "semantic", query: "what parses config", deadlineMs: 500 });
  } catch (e) {
    assert.ok(e instanceof IndexError);
    code = e.code;
  }
  const semanticMs = performance.now() - started;
  assert.equal(code, "ERR_PRISM_INDEX_TIMEOUT");
  const flood = Array.from({ length: 20_000 }, (_, i) => ({ path: `f${i}.rs`, line: 1, column: 1, snippet: "x", score: 0.5 }));
  const flooded = await semantic(async () => ({ hits: flood, status: fixture.status() })).search({
    mode: "semantic",
    query: "what parses config",
  });
  assert.equal(flooded.hits.length, 1000);
  assert.equal(flooded.complete, false);

  // The literal baseline: unchanged by the index beside it.
  const literalAfter = await operations.search({ query: "lang_rs", maxResults: 1000 });
  assert.deepEqual(literalAfter, literalBefore);

  return {
    p50: percentile(latencies, 0.5),
    p95: percentile(latencies, 0.95),
    updateMs,
    heapMiB: (peak - baseline) / 2 ** 20,
    semanticMs,
  };
}

test("the specification's scale evidence through the binding", async () => {
  let figures;
  for (let attempt = 1; attempt <= 3; attempt++) {
    figures = await run();
    console.log(`attempt ${attempt}: ${JSON.stringify(figures)}`);
    if (figures.p95 <= 250 && figures.updateMs <= 1000 && figures.heapMiB <= 64 && figures.semanticMs <= 550) break;
  }
  assert.ok(figures.p95 <= 250, `indexed query p95 ${figures.p95} ms`);
  assert.ok(figures.updateMs <= 1000, `1000-file update ${figures.updateMs} ms`);
  assert.ok(figures.heapMiB <= 64, `peak heap +${figures.heapMiB} MiB`);
  assert.ok(figures.semanticMs <= 550, `a never-answering semantic query took ${figures.semanticMs} ms of a 500 ms deadline`);
});
