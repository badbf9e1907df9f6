// The binding's own cost, measured beside the Rust facade in one run (`cargo xtask bench
// --node`); medians, as ratios and differences, since absolute times differ between machines.
//
// 1. A query through the package against the same query timed inside Rust
//    (`timeSearchesInRust`): literal on a one-file tree, and indexed_literal on the embedded
//    index of a 400-file tree. Batches alternate, so drift and load fall on both alike.
// 2. A JavaScript backend answering 1000 hits: the whole call (dispatch, JSON both ways, the
//    trust gate, the result's names), against the same backend answering one hit.

import {
  createEmbeddedIndex,
  createGitAwareRepositoryOperations,
  createIndexedRepositoryOperations,
} from "repo-search/agent";
import { timeSearchesInRust } from "repo-search";
import { worktree } from "../test/helpers.mjs";

const ROUNDS = 20;
const BATCH = 100;

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function timeInJs(operations, request, times) {
  const runs = [];
  for (let i = 0; i < times; i++) {
    const started = performance.now();
    await operations.search(request);
    runs.push(performance.now() - started);
  }
  return runs;
}

// Pairs of one call through the package and one timed inside Rust, back to back: the binding's
// cost is the median of the pairs' differences, which the machine's drift falls on alike.
async function overBinding(name, operations, request) {
  const js = [];
  const rust = [];
  const differences = [];
  await timeInJs(operations, request, BATCH);
  for (let i = 0; i < ROUNDS * BATCH; i++) {
    const [j] = await timeInJs(operations, request, 1);
    const [n] = await timeSearchesInRust(operations, request, 1);
    js.push(j);
    rust.push(n);
    differences.push(j - n);
  }
  const [j, n] = [median(js), median(rust)];
  return { name, js: j, rust: n, overhead: median(differences), ratio: j / n };
}

const rows = [];
const one = worktree({ "src/lib.rs": "pub fn parse() {}\n" });
rows.push(await overBinding("literal, one file", createGitAwareRepositoryOperations(one), { query: "parse" }));

const files = {};
for (let i = 0; i < 400; i++) files[`d${i % 9}/f${i}.rs`] = `fn item_${i}() {}\n`.repeat(20);
const tree = worktree(files);
const embedded = createIndexedRepositoryOperations(tree, {
  index: createEmbeddedIndex(tree),
  allowedModes: ["literal", "indexed_literal"],
});
rows.push(await overBinding("indexed_literal, embedded, 400 files", embedded, { query: "item_77()", mode: "indexed_literal" }));

function answering(n) {
  const hits = Array.from({ length: n }, (_, i) => ({
    path: `src/m${i % 50}/file_${i}.rs`,
    line: i + 1,
    column: 5,
    snippet: `    let value_${i} = parse(input, ${i});`,
    score: 1 / (1 + i),
  }));
  return createIndexedRepositoryOperations(one, {
    index: {
      capabilities: {},
      async search() {
        return { hits, complete: true, status: { state: "ready", sourceRevision: "r", updatedAt: Date.now() } };
      },
      async status() {
        return { state: "ready", sourceRevision: "r", updatedAt: Date.now() };
      },
      update() {},
      remove() {},
      dispose() {},
    },
    allowedModes: ["literal", "indexed_literal"],
  });
}
const request = { query: "parse", mode: "indexed_literal", maxResults: 1000 };
const thousand = answering(1000);
const single = answering(1);
const big = [];
const small = [];
await timeInJs(thousand, request, BATCH);
for (let r = 0; r < ROUNDS; r++) {
  big.push(...(await timeInJs(thousand, request, BATCH / 4)));
  small.push(...(await timeInJs(single, request, BATCH / 4)));
}

console.log("| figure | through the package | in Rust | binding's cost | ratio |");
console.log("| --- | --- | --- | --- | --- |");
for (const r of rows) {
  console.log(`| ${r.name}, p50 | ${r.js.toFixed(3)} ms | ${r.rust.toFixed(3)} ms | ${r.overhead.toFixed(3)} ms | ${r.ratio.toFixed(2)}× |`);
}
console.log(
  `| JavaScript backend, 1000 hits, whole call p50 | ${median(big).toFixed(3)} ms | | 1 hit: ${median(small).toFixed(3)} ms | ${(median(big) / median(small)).toFixed(2)}× |`,
);
