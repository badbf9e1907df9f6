// Types of the repo-search package: the indexed-code-search specification's API. Checked by
// hand against index.js and crates/repo-search-node, and by `tsc --strict` on test/types.

/** How a query is answered. */
export type SearchMode = "literal" | "indexed_literal" | "semantic";

/** The frozen index state machine. */
export type IndexState = "empty" | "building" | "ready" | "stale" | "failed";

/** The six stable error codes. */
export type IndexErrorCode =
  | "ERR_PRISM_INDEX_UNSUPPORTED"
  | "ERR_PRISM_INDEX_STALE"
  | "ERR_PRISM_INDEX_FAILED"
  | "ERR_PRISM_INDEX_LIMIT"
  | "ERR_PRISM_INDEX_TIMEOUT"
  | "ERR_PRISM_INDEX_UNTRUSTED";

export declare const ERROR_CODES: readonly IndexErrorCode[];

/** Every failure of this package. Its message is fixed text: never a backend's words. */
export declare class IndexError extends Error {
  constructor(code: IndexErrorCode, message: string);
  readonly code: IndexErrorCode;
}

/** A query. Options an index does not declare are refused in the index modes, never ignored. */
export interface SearchRequest {
  query: string;
  /** Default `literal`. */
  mode?: SearchMode;
  /** A repo-relative directory or file to search in. */
  path?: string;
  /** Default 1000, at most the facade's cap (hard 10 000). */
  maxResults?: number;
  /** Default 30 000, hard 120 000. */
  deadlineMs?: number;
  /** Aborting it ends an index query with `ERR_PRISM_INDEX_TIMEOUT`, a literal one with what it found. */
  signal?: AbortSignal;
  caseInsensitive?: boolean;
  regex?: boolean;
  /** ripgrep's `-U`: matches may span lines; each match is a hit at the line where it starts. */
  multiline?: boolean;
  /** ripgrep's `-g`: include globs, or `!` globs that exclude. */
  glob?: string[];
  /** ripgrep's `-t`: file type names. */
  type?: string[];
  includeHidden?: boolean;
  includeIgnored?: boolean;
  /** `content` (default): matching lines; `files`: one hit per file; `count`: with counts. */
  output?: "content" | "files" | "count";
  contextBefore?: number;
  contextAfter?: number;
  /** Paging: the `nextOffset` and `pageToken` of the previous page. */
  offset?: number;
  pageToken?: string;
}

export interface SearchHit {
  path: string;
  line: number;
  column: number;
  snippet: string;
  snippetTruncated: boolean;
  /** In [0, 1]; index modes only. */
  score?: number;
  count?: number;
  before?: string[];
  after?: string[];
}

export interface SkippedFiles {
  binary: number;
  nonUtf8Path: number;
  unreadable: number;
  notReached: number;
  refusedPath?: number;
}

export interface SearchStats {
  filesSearched?: number;
  filesSkipped?: SkippedFiles;
  backendHits?: number;
  duplicatesRemoved?: number;
  fullScan?: boolean;
}

/** Where index hits came from: the version that was searched. */
export interface Provenance {
  mode: SearchMode;
  state: IndexState;
  sourceRevision: string | null;
  updatedAt: number | null;
}

export interface SearchResult {
  mode: SearchMode;
  hits: SearchHit[];
  complete: boolean;
  stopped: "max_results" | "deadline" | "cancelled" | "unserved_files" | null;
  stats: SearchStats;
  /** Index modes only. */
  indexed?: Provenance;
  /** `true` in the index modes: index text is not fact; a mutation needs a fresh read. */
  untrusted_index?: true;
  nextOffset?: number;
  pageToken?: string;
}

export interface IndexStatus {
  state: IndexState;
  sourceRevision?: string | null;
  /** Milliseconds since the Unix epoch (a `Date` is accepted from a backend). */
  updatedAt?: number | Date | null;
}

export type Change =
  | { kind: "add"; path: string }
  | { kind: "edit"; path: string }
  | { kind: "rename"; oldPath: string; path: string }
  | { kind: "delete"; path: string };

export interface UpdateRequest {
  repositoryId: string;
  worktreeId: string;
  sourceRevision: string;
  changes: Change[];
}

export interface RemoveRequest {
  paths: string[];
}

/** What a backend declares. Only `true` declares; semantic mode is never inferred. */
export interface BackendCapabilities {
  semantic?: boolean;
  regex?: boolean;
  fileFilters?: boolean;
  excludeGlobs?: boolean;
  count?: boolean;
  context?: boolean;
  paging?: boolean;
  hiddenFiles?: boolean;
  ignoredFiles?: boolean;
  multiline?: boolean;
}

/** The request a backend's `search` receives: validated, with the facade's caps applied. */
export interface BackendSearchRequest {
  mode: "indexed_literal" | "semantic";
  query: string;
  path?: string;
  maxResults: number;
  deadlineMs: number;
  /** Aborted when the caller gives up or the deadline passes. */
  signal: AbortSignal;
  regex?: boolean;
  multiline?: boolean;
  caseInsensitive?: boolean;
  glob?: string[];
  type?: string[];
  includeHidden?: boolean;
  includeIgnored?: boolean;
  output?: "files" | "count";
  contextBefore?: number;
  contextAfter?: number;
}

/** A hit as a backend returns it: untrusted until the Rust trust gate has checked it. */
export interface BackendHit {
  path: string;
  line?: number;
  column?: number;
  snippet?: string;
  score: number;
  count?: number;
  before?: string[];
  after?: string[];
}

export interface BackendSearchResponse {
  hits: BackendHit[];
  /** The status of the version searched; when left out, the status reported right after. */
  status?: IndexStatus;
  /** When left out: complete only when fewer than `maxResults` hits came back. */
  complete?: boolean;
}

/** A host-owned index. Its answers are untrusted; its errors' text never reaches a caller. */
export interface RepositoryIndexBackend {
  readonly capabilities: BackendCapabilities;
  update(request: UpdateRequest): Promise<void> | void;
  remove(request: RemoveRequest): Promise<void> | void;
  search(request: BackendSearchRequest): Promise<BackendSearchResponse> | BackendSearchResponse;
  status(): Promise<IndexStatus> | IndexStatus;
  dispose(): Promise<void> | void;
}

export interface RepositoryOperations {
  /** The modes these operations serve. */
  readonly modes: readonly SearchMode[];
  search(request: SearchRequest): Promise<SearchResult>;
}

/** The index facade: updates are checked against the caps before the backend sees them. */
export interface IndexFacade {
  update(request: UpdateRequest): Promise<void>;
  remove(request: RemoveRequest): Promise<void>;
  status(): Promise<{ state: IndexState; sourceRevision: string | null; updatedAt: number | null }>;
  dispose(): Promise<void>;
}

export interface IndexedRepositoryOperations extends RepositoryOperations {
  readonly index: IndexFacade;
}

/** An index made by this package (`createEmbeddedIndex`, `createPostgresIndex`): opaque. */
export interface ReadyIndex {
  readonly kind: "embedded" | "postgres";
}

export interface StaleOptions {
  /** Default 60 000, hard 300 000. */
  maxAgeMs?: number;
  /** Default false. */
  requireSourceRevision?: boolean;
}

export interface LimitOptions {
  /** Default 1000, hard 10 000. */
  maxResults?: number;
  /** Default 4096, hard 16 384. */
  snippetBytes?: number;
  /** Default 30 000, hard 120 000. */
  deadlineMs?: number;
  /** Default 1000, hard 10 000. */
  maxChanges?: number;
  /** Default 16 MiB, hard 64 MiB. */
  maxUpdateBytes?: number;
}

export interface IndexedOperationsOptions {
  index: RepositoryIndexBackend | ReadyIndex;
  /** Default: `createGitAwareRepositoryOperations(cwd)`. */
  fallback?: RepositoryOperations;
  /** Default `["literal", "indexed_literal"]`. */
  allowedModes?: SearchMode[];
  stale?: StaleOptions;
  limits?: LimitOptions;
}

export interface EmbeddedIndexOptions {
  /** Default: `<git-dir>/repo-search`, or the user's cache directory. Never inside the worktree. */
  indexDir?: string;
  /** Keep the index fresh from file-system events rather than a stat of every file per query. */
  watch?: boolean;
  /**
   * `false`: never serve semantic; `true`: throw when it cannot be served (a damaged static model
   * in `modelDir`). Default: served, on the built-in static model unless `modelDir` holds one.
   */
  semantic?: boolean;
  /**
   * Where MiniLM (for the re-rank) and a static model of its own are looked for; the built-in
   * static model serves without one. Default: `REPO_SEARCH_MODEL_DIR`, else the user's cache
   * directory.
   */
  modelDir?: string;
  /** When MiniLM re-ranks a semantic answer's head (MiniLM must be in `modelDir`). Default `never`. */
  rerank?: "never" | "kept" | "always";
  /** How long a refresh may wait for another writer. Default 30 000. */
  deadlineMs?: number;
}

export interface PostgresIndexOptions {
  /** The worktree. Default: the current directory. */
  cwd?: string;
  /** Default `default`. */
  tenantId?: string;
  /** Default: the worktree directory's name. */
  repoId?: string;
  /** Never write; answer only when the index attests `revision` (default: HEAD). */
  readOnly?: boolean;
  revision?: string;
  deadlineMs?: number;
}

export interface RepoSearchToolOptions {
  operations: RepositoryOperations;
  /** Default `["literal"]`; the input schema's `mode` enum is exactly this list. */
  modes?: SearchMode[];
}

/** The agent-facing tool. `execute` takes the arguments as `inputSchema` names them. */
export interface RepoSearchTool {
  readonly name: "repo_search";
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
  readonly outputSchema: Record<string, unknown>;
  execute(args: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<SearchResult>;
}

export declare function createGitAwareRepositoryOperations(cwd: string): RepositoryOperations;
export declare function createIndexedRepositoryOperations(
  cwd: string,
  options: IndexedOperationsOptions,
): IndexedRepositoryOperations;
export declare function createEmbeddedIndex(cwd: string, options?: EmbeddedIndexOptions): ReadyIndex;
export declare function createPostgresIndex(url: string, options?: PostgresIndexOptions): Promise<ReadyIndex>;
export declare function createRepoSearchTool(cwd: string, options: RepoSearchToolOptions): RepoSearchTool;
/** This process's platform as the native modules are named (`linux-x64-gnu`). */
export declare function platformKey(): string;
/** For the package's benchmark: the Rust facade's own milliseconds for `times` searches. */
export declare function timeSearchesInRust(
  operations: RepositoryOperations,
  request: Omit<SearchRequest, "signal">,
  times: number,
): Promise<number[]>;
