// One worker thread of the embedded test: its own index handle on the shared worktree, queries
// one after another, and (for the writer) files written between them that hold no match.

import { parentPort, workerData } from "node:worker_threads";
import { writeFileSync } from "node:fs";
import path from "node:path";

import { createEmbeddedIndex, createIndexedRepositoryOperations } from "repo-search/agent";

const { cwd, query, queries, writer } = workerData;
const operations = createIndexedRepositoryOperations(cwd, {
  index: createEmbeddedIndex(cwd),
  allowedModes: ["literal", "indexed_literal"],
});
const failures = [];
const answers = [];
for (let i = 0; i < queries; i++) {
  if (writer) writeFileSync(path.join(cwd, `dir_0/written_${i}.txt`), `unrelated ${i}\n`);
  try {
    const r = await operations.search({ query, mode: "indexed_literal", maxResults: 1000 });
    answers.push(r.hits.map((h) => h.path).sort());
  } catch (e) {
    failures.push(`${e.code}: ${e.message}`);
  }
}
parentPort.postMessage({ failures, answers });
