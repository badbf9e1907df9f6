// Every rule of the specification, through a JavaScript backend that lies: each case names the
// lie, the request and the code the caller must get, and no error may carry the backend's words.

import { test } from "node:test";
import assert from "node:assert/strict";

import {
  createGitAwareRepositoryOperations,
  createIndexedRepositoryOperations,
  createRepoSearchTool,
  IndexError,
  ERROR_CODES,
} from "repo-search/agent";
import { backend, hit, worktree } from "./helpers.mjs";

const SECRET = "postgres://admin:hunter2@db.internal/secret-table";
const cwd = worktree();
const fallback = createGitAwareRepositoryOperations(cwd);
const errors = [];

function operations(index, options = {}) {
  return createIndexedRepositoryOperations(cwd, {
    index,
    fallback,
    allowedModes: ["literal", "indexed_literal"],
    ...options,
  });
}

async function codeOf(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof IndexError, `not an IndexError: ${e}`);
    assert.ok(ERROR_CODES.includes(e.code), e.code);
    errors.push(e);
    return e.code;
  }
  return "answered";
}

// The data-driven core: a backend (given as overrides), facade options and a request, and the
// code the caller gets ("answered" when it is served).
async function check(overrides, request, expected, options = {}) {
  const ops = operations(backend(overrides), options);
  const got = await codeOf(ops.search({ mode: "indexed_literal", query: "parse", ...request }));
  assert.equal(got, expected, JSON.stringify(request));
}

const answering = (...hits) => ({ async search() { return { hits }; } });
const statusOf = (status) => ({ async status() { return status; } });

test("hit paths that leave the root or the scope are untrusted", async () => {
  for (const path of ["/etc/passwd", "../outside.rs", "src/../../x.rs", "src\\lib.rs", "C:/x.rs", ""]) {
    await check(answering(hit({ path })), {}, "ERR_PRISM_INDEX_UNTRUSTED");
  }
  await check(answering(hit({ path: "docs/a.md" })), { path: "src" }, "ERR_PRISM_INDEX_UNTRUSTED");
  await check(answering(hit({ path: "src/lib.rs" })), { path: "src" }, "answered");
});

test("scores must be finite numbers in [0, 1]", async () => {
  for (const score of [NaN, Infinity, -Infinity, -0.01, 1.01, "0.5", null, undefined]) {
    await check(answering(hit({ score })), {}, "ERR_PRISM_INDEX_UNTRUSTED");
  }
  for (const score of [0, 1, 0.25]) await check(answering(hit({ score })), {}, "answered");
});

test("duplicates are dropped, the first one kept", async () => {
  const ops = operations(
    backend(answering(hit({ line: 3, score: 0.9 }), hit({ line: 7, score: 0.8 }), hit({ path: "b.rs" }))),
  );
  const r = await ops.search({ mode: "indexed_literal", query: "parse" });
  assert.deepEqual(
    r.hits.map((h) => [h.path, h.line]),
    [
      ["src/lib.rs", 3],
      ["b.rs", 1],
    ],
  );
  assert.equal(r.stats.duplicatesRemoved, 1);
  assert.equal(r.untrusted_index, true);
  assert.equal(r.indexed.sourceRevision, "rev-1");
  assert.equal(typeof r.indexed.updatedAt, "number");
});

test("snippets are cut to the byte cap and hits to the result cap", async () => {
  const long = hit({ snippet: "é".repeat(20_000) });
  const r = await operations(backend(answering(long))).search({ mode: "indexed_literal", query: "parse" });
  assert.ok(Buffer.byteLength(r.hits[0].snippet) <= 4096);
  assert.equal(r.hits[0].snippetTruncated, true);

  const many = Array.from({ length: 1500 }, (_, i) => hit({ path: `f${i}.rs` }));
  const capped = await operations(backend(answering(...many))).search({ mode: "indexed_literal", query: "parse" });
  assert.equal(capped.hits.length, 1000);
  assert.equal(capped.complete, false);
  const asked = await operations(backend(answering(...many))).search({
    mode: "indexed_literal",
    query: "parse",
    maxResults: 10,
  });
  assert.equal(asked.hits.length, 10);
  assert.equal(await codeOf(operations(backend()).search({ query: "parse", maxResults: 10_001 })), "ERR_PRISM_INDEX_LIMIT");
});

test("a backend's error becomes FAILED without its text", async () => {
  const throwing = {
    async search() {
      throw new Error(SECRET);
    },
  };
  await check(throwing, {}, "ERR_PRISM_INDEX_FAILED");
  await check({ search() { throw new Error(SECRET); } }, {}, "ERR_PRISM_INDEX_FAILED");
  await check({ async status() { throw new Error(SECRET); } }, {}, "ERR_PRISM_INDEX_FAILED");
  await check({ async search() { return SECRET; } }, {}, "ERR_PRISM_INDEX_FAILED");
  await check({ async search() { return { hits: [{ line: 1 }] }; } }, {}, "ERR_PRISM_INDEX_FAILED");
  await check({ async search() { return { hits: [], toString: () => SECRET, n: 10n }; } }, {}, "ERR_PRISM_INDEX_FAILED");
});

test("a backend that never answers times out at the deadline and leaves the event loop free", async () => {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  const started = Date.now();
  await check({ search: () => new Promise(() => {}) }, { deadlineMs: 300 }, "ERR_PRISM_INDEX_TIMEOUT");
  const took = Date.now() - started;
  clearInterval(timer);
  assert.ok(took >= 290 && took < 2000, `took ${took} ms`);
  assert.ok(ticks >= 10, `the event loop ran ${ticks} timers in ${took} ms`);
  await check({ status: () => new Promise(() => {}) }, { deadlineMs: 200 }, "ERR_PRISM_INDEX_TIMEOUT");
});

test("a backend that ignores its AbortSignal is abandoned at the deadline, and its signal fires", async () => {
  let seen;
  const stubborn = {
    search(request) {
      seen = request.signal;
      return new Promise((resolve) => setTimeout(() => resolve({ hits: [hit()] }), 3000).unref());
    },
  };
  const started = Date.now();
  await check(stubborn, { deadlineMs: 200 }, "ERR_PRISM_INDEX_TIMEOUT");
  assert.ok(Date.now() - started < 2000);
  assert.ok(seen instanceof AbortSignal);
  for (let i = 0; i < 50 && !seen.aborted; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(seen.aborted, true, "the backend's signal was not aborted");
});

test("the caller's AbortSignal stops an index query as a timeout", async () => {
  const slow = { search: () => new Promise(() => {}) };
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 50);
  const started = Date.now();
  await check(slow, { signal: controller.signal }, "ERR_PRISM_INDEX_TIMEOUT");
  assert.ok(Date.now() - started < 2000);
  await check({}, { signal: AbortSignal.abort() }, "ERR_PRISM_INDEX_TIMEOUT");
});

test("states and freshness: only a fresh ready index is served", async () => {
  const now = Date.now();
  const cases = [
    [{ state: "ready", sourceRevision: "r", updatedAt: now }, "answered"],
    [{ state: "empty", sourceRevision: "r", updatedAt: now }, "ERR_PRISM_INDEX_STALE"],
    [{ state: "building", sourceRevision: "r", updatedAt: now }, "ERR_PRISM_INDEX_STALE"],
    [{ state: "stale", sourceRevision: "r", updatedAt: now }, "ERR_PRISM_INDEX_STALE"],
    [{ state: "failed", sourceRevision: "r", updatedAt: now }, "ERR_PRISM_INDEX_FAILED"],
    [{ state: "warm", sourceRevision: "r", updatedAt: now }, "ERR_PRISM_INDEX_FAILED"],
    [{ state: "READY", sourceRevision: "r", updatedAt: now }, "ERR_PRISM_INDEX_FAILED"],
    [{ sourceRevision: "r", updatedAt: now }, "ERR_PRISM_INDEX_FAILED"],
    [null, "ERR_PRISM_INDEX_FAILED"],
    [{ state: "ready", sourceRevision: "r" }, "ERR_PRISM_INDEX_STALE"],
    [{ state: "ready", sourceRevision: "r", updatedAt: NaN }, "ERR_PRISM_INDEX_STALE"],
    [{ state: "ready", sourceRevision: "r", updatedAt: now - 61_000 }, "ERR_PRISM_INDEX_STALE"],
    [{ state: "ready", sourceRevision: "r", updatedAt: new Date(now) }, "answered"],
  ];
  for (const [status, expected] of cases) {
    await check(statusOf(status), {}, expected);
  }
  const strict = { stale: { maxAgeMs: 60_000, requireSourceRevision: true } };
  await check(statusOf({ state: "ready", updatedAt: now }), {}, "ERR_PRISM_INDEX_STALE", strict);
  await check(statusOf({ state: "ready", updatedAt: now }), {}, "answered", {
    stale: { requireSourceRevision: false },
  });
  const window = { stale: { maxAgeMs: 5_000 } };
  await check(statusOf({ state: "ready", sourceRevision: "r", updatedAt: now - 10_000 }), {}, "ERR_PRISM_INDEX_STALE", window);
  // The status the answer attests is judged too: a search that reports an older version.
  await check(
    { async search() { return { hits: [hit()], status: { state: "ready", sourceRevision: "r", updatedAt: now - 120_000 } }; } },
    {},
    "ERR_PRISM_INDEX_STALE",
  );
  assert.throws(
    () => operations(backend(), { stale: { maxAgeMs: 300_001 } }),
    (e) => e instanceof IndexError && e.code === "ERR_PRISM_INDEX_LIMIT",
  );
});

test("semantic needs the backend's declaration and modes must be allowed", async () => {
  assert.throws(
    () => operations(backend(), { allowedModes: ["literal", "semantic"] }),
    (e) => e.code === "ERR_PRISM_INDEX_UNSUPPORTED",
  );
  // Only `true` declares: semantic is never duck-typed.
  assert.throws(
    () => operations(backend({ capabilities: { semantic: "yes" } }), { allowedModes: ["semantic"] }),
    (e) => e.code === "ERR_PRISM_INDEX_UNSUPPORTED",
  );
  await check({}, { mode: "semantic" }, "ERR_PRISM_INDEX_UNSUPPORTED");
  const semantic = operations(backend({ capabilities: { semantic: true } }), {
    allowedModes: ["literal", "semantic"],
  });
  assert.equal(await codeOf(semantic.search({ mode: "semantic", query: "parse the config" })), "answered");
  assert.equal(await codeOf(semantic.search({ mode: "indexed_literal", query: "parse" })), "ERR_PRISM_INDEX_UNSUPPORTED");
  // No silent fallback: an index query that fails is never answered by a scan.
  const b = backend({ async search() { throw new Error("down"); } });
  const r = operations(b);
  assert.equal(await codeOf(r.search({ mode: "indexed_literal", query: "parse" })), "ERR_PRISM_INDEX_FAILED");
  const literal = await r.search({ query: "parse" });
  assert.deepEqual(literal, await fallback.search({ query: "parse" }));
  assert.equal(literal.untrusted_index, undefined);
});

test("options the backend does not declare are refused, never ignored", async () => {
  await check({}, { regex: true }, "ERR_PRISM_INDEX_UNSUPPORTED");
  await check({}, { glob: ["*.rs"] }, "ERR_PRISM_INDEX_UNSUPPORTED");
  await check({}, { includeHidden: true }, "ERR_PRISM_INDEX_UNSUPPORTED");
  await check({}, { maxresults: 3 }, "ERR_PRISM_INDEX_UNSUPPORTED");
  let seen;
  const declared = {
    capabilities: { regex: true },
    async search(request) {
      seen = request;
      return { hits: [hit()] };
    },
  };
  await check(declared, { regex: true, query: "pa.se", maxResults: 5, deadlineMs: 900, path: "src" }, "answered");
  assert.equal(seen.regex, true);
  assert.equal(seen.maxResults, 5);
  assert.equal(seen.deadlineMs, 900);
  assert.equal(seen.path, "src");
  assert.equal(seen.mode, "indexed_literal");
});

test("updates are capped before the backend sees them, renames are a remove plus an add", async () => {
  const b = backend();
  const ops = operations(b);
  const base = { repositoryId: "repo", worktreeId: "main", sourceRevision: "rev-2" };
  const many = Array.from({ length: 1001 }, (_, i) => ({ kind: "add", path: `f${i}.rs` }));
  assert.equal(await codeOf(ops.index.update({ ...base, changes: many })), "ERR_PRISM_INDEX_LIMIT");
  const huge = [{ kind: "add", path: "a".repeat(4097) }];
  assert.notEqual(await codeOf(ops.index.update({ ...base, changes: huge })), "answered");
  for (const repositoryId of ["https://user:pass@example.com/r.git", "ssh://git:s3cret@host/r.git", "x".repeat(300)]) {
    assert.notEqual(await codeOf(ops.index.update({ ...base, repositoryId, changes: [] })), "answered", repositoryId);
  }
  for (const path of ["/abs.rs", "../up.rs", "a\\b.rs"]) {
    assert.notEqual(await codeOf(ops.index.update({ ...base, changes: [{ kind: "add", path }] })), "answered", path);
  }
  assert.equal(await codeOf(ops.index.remove({ paths: Array.from({ length: 1001 }, (_, i) => `f${i}`) })), "ERR_PRISM_INDEX_LIMIT");
  assert.deepEqual(b.calls, [], "a refused update reached the backend");

  await ops.index.update({
    ...base,
    changes: [
      { kind: "rename", oldPath: "old.rs", path: "new.rs" },
      { kind: "edit", path: "src/lib.rs" },
      { kind: "delete", path: "gone.rs" },
    ],
  });
  const removed = b.calls.filter(([op]) => op === "remove").flatMap(([, r]) => r.paths);
  assert.deepEqual(removed.sort(), ["gone.rs", "old.rs"]);
  const updated = b.calls.find(([op]) => op === "update")[1];
  assert.deepEqual(updated.changes.map((c) => [c.kind, c.path]), [["add", "new.rs"], ["edit", "src/lib.rs"]]);
  assert.equal(updated.sourceRevision, "rev-2");
  assert.equal(updated.repositoryId, "repo");
  assert.equal(await codeOf(ops.index.update({ ...base, changes: [{ kind: "move", path: "a" }] })), "ERR_PRISM_INDEX_UNSUPPORTED");

  const status = await ops.index.status();
  assert.equal(status.state, "ready");
  assert.equal(status.sourceRevision, "rev-1");
  assert.equal(typeof status.updatedAt, "number");
  await ops.index.dispose();
  assert.equal(b.calls.filter(([op]) => op === "dispose").length, 1);
  assert.notEqual(await codeOf(ops.search({ mode: "indexed_literal", query: "parse" })), "answered");
  assert.equal((await ops.search({ query: "parse" })).hits.length, 1, "literal works after dispose");
});

test("the tool exposes exactly its modes", async () => {
  const ops = operations(backend());
  const tool = createRepoSearchTool(cwd, { operations: ops });
  assert.equal(tool.name, "repo_search");
  assert.deepEqual(tool.inputSchema.properties.mode.enum, ["literal"]);
  const both = createRepoSearchTool(cwd, { operations: ops, modes: ["literal", "indexed_literal"] });
  assert.deepEqual(both.inputSchema.properties.mode.enum, ["literal", "indexed_literal"]);
  const r = await both.execute({ query: "parse", mode: "indexed_literal" });
  assert.equal(r.untrusted_index, true);
  assert.equal(await codeOf(tool.execute({ query: "parse", mode: "indexed_literal" })), "ERR_PRISM_INDEX_UNSUPPORTED");
  assert.throws(() => createRepoSearchTool(cwd, { operations: ops, modes: ["semantic"] }), (e) => e.code === "ERR_PRISM_INDEX_UNSUPPORTED");
  assert.throws(() => createRepoSearchTool(cwd, { operations: { search() {} } }), (e) => e.code === "ERR_PRISM_INDEX_UNSUPPORTED");
});

test("no error carries a backend's words", () => {
  assert.ok(errors.length > 40, `only ${errors.length} errors were seen`);
  for (const e of errors) {
    for (const word of ["hunter2", "secret", "admin", "down", "postgres://"]) {
      assert.ok(!e.message.includes(word), `${e.code}: ${e.message}`);
      assert.ok(!String(e.stack).includes(word), e.stack);
    }
  }
});
