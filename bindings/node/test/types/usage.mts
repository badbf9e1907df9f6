// Every function of the package, used as a TypeScript host would: `tsc --strict` must accept it
// against index.d.ts (`cargo xtask node`). It is type-checked, never run.
import {
  createEmbeddedIndex,
  createGitAwareRepositoryOperations,
  createIndexedRepositoryOperations,
  createPostgresIndex,
  createRepoSearchTool,
  ERROR_CODES,
  IndexError,
  platformKey,
  timeSearchesInRust,
  type BackendSearchRequest,
  type BackendSearchResponse,
  type IndexErrorCode,
  type IndexStatus,
  type RepositoryIndexBackend,
  type SearchResult,
  type UpdateRequest,
} from "repo-search/agent";

const cwd = process.cwd();

class HostIndex implements RepositoryIndexBackend {
  readonly capabilities = { semantic: true, regex: false };
  private readonly files = new Map<string, string>();
  async update(request: UpdateRequest): Promise<void> {
    for (const change of request.changes) {
      if (change.kind === "rename") this.files.delete(change.oldPath);
      this.files.set(change.path, request.sourceRevision);
    }
  }
  async remove(request: { paths: string[] }): Promise<void> {
    for (const path of request.paths) this.files.delete(path);
  }
  async search(request: BackendSearchRequest): Promise<BackendSearchResponse> {
    request.signal.throwIfAborted();
    const hits = [...this.files.keys()].slice(0, request.maxResults).map((path) => ({ path, score: 1 }));
    return { hits, status: await this.status(), complete: true };
  }
  async status(): Promise<IndexStatus> {
    return { state: "ready", sourceRevision: "rev", updatedAt: new Date() };
  }
  async dispose(): Promise<void> {}
}

async function main(): Promise<void> {
  const fallback = createGitAwareRepositoryOperations(cwd);
  const operations = createIndexedRepositoryOperations(cwd, {
    index: new HostIndex(),
    fallback,
    allowedModes: ["literal", "indexed_literal", "semantic"],
    stale: { maxAgeMs: 60_000, requireSourceRevision: true },
    limits: { maxResults: 500, deadlineMs: 10_000 },
  });
  await operations.index.update({
    repositoryId: "r",
    worktreeId: "w",
    sourceRevision: "rev",
    changes: [{ kind: "add", path: "a.rs" }, { kind: "rename", oldPath: "b.rs", path: "c.rs" }],
  });
  await operations.index.remove({ paths: ["a.rs"] });
  const status = await operations.index.status();
  const state: "empty" | "building" | "ready" | "stale" | "failed" = status.state;
  const controller = new AbortController();
  const result: SearchResult = await operations.search({
    query: "parse",
    mode: "semantic",
    path: "src",
    maxResults: 10,
    deadlineMs: 5_000,
    signal: controller.signal,
  });
  const first = result.hits[0];
  const score: number | undefined = first?.score;
  const revision: string | null | undefined = result.indexed?.sourceRevision;
  const untrusted: true | undefined = result.untrusted_index;
  await operations.index.dispose();

  const embedded = createEmbeddedIndex(cwd, { watch: true, semantic: false, rerank: "never" });
  const shared = await createPostgresIndex("postgres://localhost/repo_search", { cwd, readOnly: true });
  for (const index of [embedded, shared]) {
    const ops = createIndexedRepositoryOperations(cwd, { index, allowedModes: ["literal", "indexed_literal"] });
    const tool = createRepoSearchTool(cwd, { operations: ops, modes: ["literal", "indexed_literal"] });
    const answer = await tool.execute({ query: "fn main", mode: "indexed_literal" }, { signal: controller.signal });
    console.log(tool.name, tool.inputSchema, answer.hits.length);
    const times: number[] = await timeSearchesInRust(ops, { query: "main", mode: "indexed_literal" }, 10);
    console.log(times.length);
  }
  try {
    await fallback.search({ query: "x", maxResults: 0 });
  } catch (e) {
    if (e instanceof IndexError) {
      const code: IndexErrorCode = e.code;
      console.log(code, ERROR_CODES.includes(code));
    }
  }
  console.log(state, score, revision, untrusted, platformKey());
}

void main();
