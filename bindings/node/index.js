// The repo-search package: the indexed-code-search specification's API over the Rust
// implementation (crates/repo-search-node). This file only loads the native module, maps
// JavaScript calling conventions (objects, AbortSignal, thrown errors) onto it, and wraps a
// backend written in JavaScript; every rule of the specification is enforced in Rust.

import { createRequire } from "node:module";
import { existsSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);

/** The six stable error codes. */
export const ERROR_CODES = Object.freeze([
  "ERR_PRISM_INDEX_UNSUPPORTED",
  "ERR_PRISM_INDEX_STALE",
  "ERR_PRISM_INDEX_FAILED",
  "ERR_PRISM_INDEX_LIMIT",
  "ERR_PRISM_INDEX_TIMEOUT",
  "ERR_PRISM_INDEX_UNTRUSTED",
]);

/** Every failure of this package: `code` is one of `ERROR_CODES`. */
export class IndexError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "IndexError";
    this.code = code;
  }
}

/** This process's platform as the native modules are named: `linux-x64-gnu`, `darwin-arm64`... */
export function platformKey() {
  const { platform, arch } = process;
  if (platform !== "linux") return `${platform}-${arch}`;
  const glibc = process.report?.getReport?.()?.header?.glibcVersionRuntime;
  return `${platform}-${arch}-${glibc ? "gnu" : "musl"}`;
}

function loadNative() {
  const key = platformKey();
  const dir = fileURLToPath(new URL("./native/", import.meta.url));
  const file = `${dir}repo-search.${key}.node`;
  if (!existsSync(file)) {
    const built = existsSync(dir)
      ? readdirSync(dir)
          .filter((f) => f.endsWith(".node"))
          .map((f) => f.slice("repo-search.".length, -".node".length))
      : [];
    throw new Error(
      `repo-search has no native module for this platform (${key}); ` +
        (built.length ? `this package holds one for ${built.join(", ")}` : "this package holds none") +
        ". Build it with `cargo xtask node` from the repo-search repository.",
    );
  }
  return require(file);
}

const native = loadNative();

function unsupported(message) {
  return new IndexError("ERR_PRISM_INDEX_UNSUPPORTED", message);
}

// A native error carries the reply JSON as its message: `{"error": {code, message}}`.
function fromNative(error) {
  try {
    const reply = JSON.parse(error.message);
    if (reply?.error?.code) return new IndexError(reply.error.code, reply.error.message);
  } catch {
    // Not a reply: a programming error of the caller (a wrong argument type).
  }
  return error;
}

function callNative(fn) {
  try {
    return fn();
  } catch (error) {
    throw fromNative(error);
  }
}

function unwrap(text) {
  const reply = JSON.parse(text);
  if (reply.error) throw new IndexError(reply.error.code, reply.error.message);
  return reply.ok;
}

// Runs `call(token)` with a native cancel token that `signal` fires (none without a signal).
async function withSignal(signal, call) {
  if (signal !== undefined && signal !== null && !(signal instanceof AbortSignal)) {
    throw unsupported("signal must be an AbortSignal");
  }
  // Without a signal there is nothing to cancel: no token is made.
  if (!signal) return unwrap(await call(undefined));
  const token = new native.CancelToken();
  if (signal.aborted) token.cancel();
  const onAbort = () => token.cancel();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    return unwrap(await call(token));
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

function requestObject(request, what) {
  if (request === null || typeof request !== "object" || Array.isArray(request)) {
    throw unsupported(`${what} must be an object`);
  }
  return request;
}

// The native half of each object this package hands out; never reachable from outside.
const nativeOf = new WeakMap();

function operationsObject(ops) {
  const operations = {
    modes: Object.freeze(ops.modes()),
    async search(request) {
      const { signal, ...rest } = requestObject(request, "request");
      return withSignal(signal, (token) => ops.search(JSON.stringify(rest), token));
    },
  };
  nativeOf.set(operations, ops);
  return operations;
}

/**
 * The literal search over `cwd`: `RepositoryOperations` with `search(request)`, ripgrep's file
 * selection and a bounded scan.
 */
export function createGitAwareRepositoryOperations(cwd) {
  return operationsObject(callNative(() => native.gitAwareOperations(String(cwd))));
}

// A status's `updatedAt` may be a Date: sent as its time. (JSON makes NaN and Infinity `null`,
// which the Rust side refuses wherever a number must be: a score, a line, a time.)
function withTime(status) {
  return status?.updatedAt instanceof Date ? { ...status, updatedAt: status.updatedAt.getTime() } : status;
}

const BACKEND_METHODS = ["update", "remove", "search", "status", "dispose"];

// Wraps a JavaScript backend in the one function the native side calls. It always resolves to
// JSON text, and never lets a backend's error text through: a throw is `{"error": true}`.
function dispatcher(backend) {
  const inFlight = new Map();
  return async (envelope) => {
    const { op, id, payload } = JSON.parse(envelope);
    if (op === "abort") {
      inFlight.get(id)?.abort();
      inFlight.delete(id);
      return "{}";
    }
    const controller = new AbortController();
    inFlight.set(id, controller);
    try {
      let value;
      switch (op) {
        case "search":
          value = await backend.search({ ...payload, signal: controller.signal });
          if (value?.status?.updatedAt instanceof Date) value = { ...value, status: withTime(value.status) };
          break;
        case "status":
          value = withTime(await backend.status());
          break;
        case "update":
          value = await backend.update(payload);
          break;
        case "remove":
          value = await backend.remove(payload);
          break;
        case "dispose":
          value = await backend.dispose();
          break;
        default:
          return '{"error":true}';
      }
      return JSON.stringify({ ok: value ?? null });
    } catch {
      return '{"error":true}';
    } finally {
      inFlight.delete(id);
    }
  };
}

// A ready index made by this package: opaque, plugged in as `index`.
class ReadyIndex {
  constructor(kind, handle) {
    this.kind = kind;
    nativeOf.set(this, handle);
    Object.freeze(this);
  }
}

function nativeIndex(index) {
  if (index instanceof ReadyIndex) return nativeOf.get(index);
  if (index === null || typeof index !== "object") {
    throw unsupported("index must be a RepositoryIndexBackend or an index made by this package");
  }
  const missing = BACKEND_METHODS.filter((m) => typeof index[m] !== "function");
  if (missing.length) {
    throw unsupported(`index is not a RepositoryIndexBackend: it has no ${missing.join(", ")}`);
  }
  const declared = index.capabilities ?? {};
  return callNative(() => native.jsIndex(dispatcher(index), JSON.stringify(declared)));
}

/**
 * The embedded trigram index of the worktree holding `cwd`, brought up to date with the worktree
 * before every query (a stat of every file, or with `watch: true` the file-system watcher), and
 * `semantic` beside it when a model is found.
 */
export function createEmbeddedIndex(cwd, options = {}) {
  const handle = callNative(() =>
    native.openEmbeddedIndex(String(cwd), JSON.stringify(requestObject(options, "options"))),
  );
  return new ReadyIndex("embedded", handle);
}

/**
 * The shared index in PostgreSQL at `url` for the worktree holding `options.cwd`, pushed to
 * before every query.
 */
export async function createPostgresIndex(url, options = {}) {
  try {
    const handle = await native.openPostgresIndex(
      String(url),
      JSON.stringify(requestObject(options, "options")),
    );
    return new ReadyIndex("postgres", handle);
  } catch (error) {
    throw fromNative(error);
  }
}

/**
 * The specification's facade: `literal` goes to `fallback` unchanged, the index modes only to
 * `index`, behind the freshness and trust gates, and `index.update/remove/status/dispose` are
 * checked against the caps before the backend sees them.
 */
export function createIndexedRepositoryOperations(cwd, options) {
  const { index, fallback, ...rest } = requestObject(options, "options");
  const indexHandle = nativeIndex(index);
  const fallbackOps =
    fallback === undefined ? createGitAwareRepositoryOperations(cwd) : fallback;
  const fallbackHandle = nativeOf.get(fallbackOps);
  if (!fallbackHandle || fallbackHandle instanceof ReadyIndex) {
    throw unsupported("fallback must come from createGitAwareRepositoryOperations");
  }
  const ops = callNative(() =>
    native.indexedOperations(String(cwd), indexHandle, fallbackHandle, JSON.stringify(rest)),
  );
  const operations = operationsObject(ops);
  operations.index = Object.freeze({
    async update(request) {
      return unwrap(await ops.update(JSON.stringify(requestObject(request, "update"))));
    },
    async remove(request) {
      return unwrap(await ops.remove(JSON.stringify(requestObject(request, "remove"))));
    },
    async status() {
      return unwrap(await ops.status());
    },
    async dispose() {
      return unwrap(await ops.dispose());
    },
  });
  return Object.freeze(operations);
}

/**
 * The agent-facing `repo_search` tool over `operations`, exposing exactly `modes` (default
 * `["literal"]`); the input schema's `mode` enum is that list.
 */
export function createRepoSearchTool(cwd, { operations, modes } = {}) {
  const ops = nativeOf.get(operations);
  if (!ops || ops instanceof ReadyIndex) {
    throw unsupported("operations must come from createIndexedRepositoryOperations or createGitAwareRepositoryOperations");
  }
  if (modes !== undefined && !Array.isArray(modes)) throw unsupported("modes must be an array");
  const tool = callNative(() =>
    native.repoSearchTool(String(cwd), ops, modes === undefined ? "" : JSON.stringify(modes)),
  );
  const { name, description, inputSchema, outputSchema } = JSON.parse(tool.definition());
  return Object.freeze({
    name,
    description,
    inputSchema,
    outputSchema,
    async execute(args, { signal } = {}) {
      return withSignal(signal, (token) => tool.execute(JSON.stringify(args ?? null), token));
    },
  });
}

/** For the package's benchmark: the Rust facade's own milliseconds for `times` searches. */
export async function timeSearchesInRust(operations, request, times) {
  const ops = nativeOf.get(operations);
  if (!ops) throw unsupported("operations must come from this package");
  try {
    return await ops.timeSearches(JSON.stringify(request), times);
  } catch (error) {
    throw fromNative(error);
  }
}
