//! The Node.js binding of repo-search: the native half of the `repo-search` npm package
//! (`bindings/node`), whose API is the specification's TypeScript one.
//!
//! Each JavaScript function of the package is a thin shell over one class or function here:
//!
//! - [`NativeOperations`]: `createGitAwareRepositoryOperations` (the literal search) and
//!   `createIndexedRepositoryOperations` (the Rust facade, [`IndexedRepositoryOperations`], with
//!   its routing, freshness and trust gates and update caps, over any index below);
//! - [`NativeIndex`]: an index to plug in: a backend written in JavaScript (`JsBackend`, whose
//!   every answer passes the Rust trust gate), the embedded index kept as fresh as the CLI keeps
//!   it, or the shared index in PostgreSQL, both from [`repo_search_host`];
//! - [`NativeTool`]: `createRepoSearchTool`, the [`RepoSearchTool`] over those operations;
//! - [`CancelToken`]: what an `AbortSignal` fires.
//!
//! Values cross as JSON text (`wire`): requests by the specification's names in, and every
//! result as `{"ok": value}` or `{"error": {code, message}}` out, which the loader turns into a
//! value or a thrown `IndexError`. Futures run on napi's Tokio runtime, so no call blocks the
//! event loop.
//!
//! It knows Node-API and the specification's names; it does not know clap, MCP or terminal
//! output, and it decides nothing a Rust host would decide differently: that is
//! `repo-search-host`'s.
//!
//! # Example
//!
//! From JavaScript, through the package's loader:
//!
//! ```js
//! import { createIndexedRepositoryOperations, createGitAwareRepositoryOperations,
//!          createEmbeddedIndex } from "repo-search/agent";
//! const operations = createIndexedRepositoryOperations(cwd, {
//!   index: createEmbeddedIndex(cwd),
//!   fallback: createGitAwareRepositoryOperations(cwd),
//!   allowedModes: ["literal", "indexed_literal"],
//! });
//! const result = await operations.search({ query: "fn main", mode: "indexed_literal" });
//! ```

mod answer;
mod js_backend;
mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use index_contract::{
    CancelSignal, ErrorCode, IndexError, RepositoryIndexBackend, RepositoryOperations, SearchMode,
    limits::{DEFAULT_DEADLINE_MS, SearchLimits, StalePolicy, UpdateLimits},
};
use literal_search::LiteralSearch;
use napi::bindgen_prelude::{Function, Promise, PromiseRaw};
use napi::{Env, Status};
use napi_derive::napi;
use repo_search_host::{Host, HostConfig, HostError, IndexChoice, RerankPolicy, SemanticConfig};
use repo_search_tool::{
    IndexedOperationsConfig, IndexedRepositoryOperations, RepoSearchTool, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::js_backend::JsBackend;
use crate::wire::{Failure, error_reply, reply, status_to_js};

/// A thrown error whose message is the error reply, which the loader turns into an `IndexError`.
fn thrown(e: impl Into<Failure>) -> napi::Error {
    napi::Error::new(Status::GenericFailure, error_reply(e))
}

/// A host's failure as the contract's error: its code, and fixed words naming the binding's
/// options rather than the CLI's flags.
fn host_error(e: HostError) -> Failure {
    let problem = match &e {
        HostError::Tool(inner) => return inner.clone().into(),
        HostError::MissingRoot => "the directory does not exist or is not readable",
        HostError::NotAWorktree => "the directory is not inside a git worktree",
        HostError::IndexDirInsideWorktree => "indexDir is inside the searched worktree",
        HostError::IndexDirFlagUnusable => "indexDir cannot be created, or is not a directory",
        HostError::IndexDirUnusable => {
            "no index directory could be written: neither the git directory nor the cache directory"
        }
        HostError::IndexUnopenable => "the index could not be opened",
        HostError::IndexFailed => "the index is damaged, or reading the worktree for it failed",
        HostError::Busy => "another writer held the index past the deadline",
        HostError::DiskFull => "the device holding the index is full; nothing committed was lost",
        HostError::DeadlineUnusable => "deadlineMs is outside 1..=120000",
        HostError::RerankModelMissing => "rerank \"always\" needs MiniLM in the model directory",
        HostError::ModelDamaged(_) => "a model file is damaged; reinstall the model",
        HostError::SharedUnusable => "the PostgreSQL URL or an id is not usable",
        HostError::SharedUnreachable => "the PostgreSQL server could not be reached",
        HostError::SharedTimeout => "the shared index did not answer in time; nothing was written",
        HostError::SharedFailed => "the shared index failed; nothing was written",
        HostError::SharedReadOnly => "the shared index is read-only here",
        _ => "the host could not serve",
    };
    Failure::new(e.code(), problem)
}

/// What an `AbortSignal` fires: the loader cancels the token when the caller's signal aborts.
#[napi]
pub struct CancelToken {
    signal: CancelSignal,
}

#[napi]
impl CancelToken {
    /// A token not yet cancelled.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> CancelToken {
        CancelToken {
            signal: CancelSignal::new(),
        }
    }

    /// Cancels every call that holds this token.
    #[napi]
    pub fn cancel(&self) {
        self.signal.cancel();
    }
}

/// An index to plug into `createIndexedRepositoryOperations`.
#[napi]
pub struct NativeIndex {
    backend: Arc<dyn RepositoryIndexBackend>,
}

/// `createEmbeddedIndex(cwd, options)`'s options.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EmbeddedOptions {
    index_dir: Option<PathBuf>,
    watch: Option<bool>,
    semantic: Option<bool>,
    model_dir: Option<PathBuf>,
    rerank: Option<String>,
    deadline_ms: Option<u64>,
}

/// `createPostgresIndex(url, options)`'s options.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PostgresOptions {
    cwd: Option<PathBuf>,
    tenant_id: Option<String>,
    repo_id: Option<String>,
    read_only: Option<bool>,
    revision: Option<String>,
    deadline_ms: Option<u64>,
}

fn options<T: Default + for<'de> Deserialize<'de>>(
    json: &str,
    what: &'static str,
) -> Result<T, IndexError> {
    if json.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_str(json).map_err(|_| IndexError::InvalidArgument {
        argument: what,
        problem: "has a property it does not take, or one of the wrong type; index.d.ts lists them",
        code: ErrorCode::Unsupported,
    })
}

fn deadline(ms: Option<u64>) -> Duration {
    Duration::from_millis(ms.unwrap_or(DEFAULT_DEADLINE_MS))
}

/// `createEmbeddedIndex(cwd, options)`: the embedded trigram index of the worktree holding `cwd`,
/// brought up to date with the worktree before every query as the CLI's is (the stat refresh, or
/// with `watch` the file-system watcher), and `semantic` beside it unless `semantic: false`.
#[napi]
pub fn open_embedded_index(cwd: String, options_json: String) -> napi::Result<NativeIndex> {
    let opts: EmbeddedOptions = options(&options_json, "options").map_err(thrown)?;
    let mut config = HostConfig::new(&cwd);
    config.index_dir = opts.index_dir;
    config.watch = opts.watch.unwrap_or(false);
    config.deadline = deadline(opts.deadline_ms);
    let rerank = match opts.rerank.as_deref() {
        Some("kept") => RerankPolicy::Kept,
        None | Some("never") => RerankPolicy::Never,
        Some("always") => RerankPolicy::Always,
        Some(_) => {
            return Err(thrown(IndexError::InvalidArgument {
                argument: "rerank",
                problem: "must be \"never\", \"kept\" or \"always\"",
                code: ErrorCode::Unsupported,
            }));
        }
    };
    // The static model is built in: `semantic` is served unless it is turned off, and the model
    // directory only adds MiniLM's re-rank (or a static model of its own).
    if opts.semantic != Some(false) {
        config.semantic = Some(SemanticConfig {
            model_dir: repo_search_host::model_dir(opts.model_dir.as_deref()),
            rerank,
        });
    }
    // Opening the embedded index awaits nothing; a runtime of its own keeps this call
    // synchronous, as the specification's example constructs it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|_| thrown(IndexError::BackendFailed))?;
    let host = runtime
        .block_on(Host::open(config))
        .map_err(|e| thrown(host_error(e)))?;
    // Asked for by name, `semantic` is served or refused, never dropped: the model directory's
    // own static model is damaged or not whole when the host serves none.
    if opts.semantic == Some(true) && !host.serves_semantic() {
        return Err(thrown(match host.semantic_damage() {
            Some(damage) => host_error(HostError::ModelDamaged(damage.clone())),
            None => Failure::new(
                ErrorCode::Unsupported,
                "semantic: the model directory's static model is not whole (the model file, its \
                 .sha256 or the tokenizer is missing); remove static-256.bin and its .sha256 to \
                 use the built-in model",
            ),
        }));
    }
    let host = Arc::new(host);
    let backend = host
        .fresh_backend()
        .ok_or_else(|| thrown(IndexError::BackendFailed))?;
    Ok(NativeIndex { backend })
}

/// `createPostgresIndex(url, options)`: the shared index in PostgreSQL for the worktree holding
/// `options.cwd` (default: the current directory), pushed to before every query.
#[napi]
pub fn open_postgres_index<'env>(
    env: &'env Env,
    url: String,
    options_json: String,
) -> napi::Result<PromiseRaw<'env, NativeIndex>> {
    let opts: PostgresOptions = options(&options_json, "options").map_err(thrown)?;
    let shared = repo_search_host::SharedConfig::new(
        &url,
        opts.tenant_id,
        opts.repo_id,
        opts.read_only.unwrap_or(false),
        opts.revision,
    )
    .map_err(|e| thrown(host_error(e)))?;
    let mut config = HostConfig::new(opts.cwd.unwrap_or_else(|| PathBuf::from(".")));
    config.index = IndexChoice::Shared(Box::new(shared));
    config.deadline = deadline(opts.deadline_ms);
    env.spawn_future(async move {
        let host = Host::open(config)
            .await
            .map_err(|e| thrown(host_error(e)))?;
        let host = Arc::new(host);
        let backend = host
            .fresh_backend()
            .ok_or_else(|| thrown(IndexError::BackendFailed))?;
        Ok(NativeIndex { backend })
    })
}

/// A backend written in JavaScript: `dispatch` is the loader's wrapper around it, and
/// `capabilities_json` what it declared.
#[napi]
pub fn js_index(
    dispatch: Function<String, Promise<String>>,
    capabilities_json: String,
) -> napi::Result<NativeIndex> {
    let capabilities = js_backend::declared_capabilities(&capabilities_json);
    Ok(NativeIndex {
        backend: Arc::new(JsBackend::new(dispatch, capabilities)?),
    })
}

/// `RepositoryOperations`: the literal search alone, or the facade over an index.
#[napi]
pub struct NativeOperations {
    operations: Arc<dyn RepositoryOperations>,
    facade: Option<Arc<IndexedRepositoryOperations>>,
    spec: ToolSpec,
    root: PathBuf,
}

/// The directory every path of an answer is relative to: the root of the git worktree holding
/// `cwd`, as the embedded index and the CLI use, so that `literal` and the index modes name a
/// file alike from any directory inside it; `cwd` itself outside a worktree.
fn root_of(cwd: &str) -> Result<PathBuf, Failure> {
    let dir = Path::new(cwd).canonicalize().ok().filter(|p| p.is_dir());
    let dir = dir.ok_or(Failure::new(
        ErrorCode::Unsupported,
        "cwd does not exist or is not a directory",
    ))?;
    Ok(repo_search_host::worktree_root(&dir).map_or(dir, |(root, _)| root))
}

/// `createGitAwareRepositoryOperations(cwd)`: the literal search over the worktree holding
/// `cwd`, with ripgrep's selection (git's ignore rules, hidden files left out).
#[napi]
pub fn git_aware_operations(cwd: String) -> napi::Result<NativeOperations> {
    let root = root_of(&cwd).map_err(thrown)?;
    let search = LiteralSearch::new(&root).map_err(|_| {
        thrown(Failure::new(
            ErrorCode::Unsupported,
            "cwd does not exist or is not a directory",
        ))
    })?;
    let operations: Arc<dyn RepositoryOperations> = Arc::new(search);
    let spec = ToolSpec::of_operations(operations.as_ref(), &operations.modes()).map_err(thrown)?;
    Ok(NativeOperations {
        operations,
        facade: None,
        spec,
        root,
    })
}

/// `createIndexedRepositoryOperations(cwd, options)`'s options besides `index` and `fallback`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IndexedOptions {
    allowed_modes: Option<Vec<String>>,
    stale: Option<StaleOptions>,
    limits: Option<LimitOptions>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StaleOptions {
    max_age_ms: Option<u64>,
    require_source_revision: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LimitOptions {
    max_results: Option<usize>,
    snippet_bytes: Option<usize>,
    deadline_ms: Option<u64>,
    max_changes: Option<usize>,
    max_update_bytes: Option<usize>,
}

fn modes(names: &[String]) -> Result<Vec<SearchMode>, IndexError> {
    names
        .iter()
        .map(|n| {
            SearchMode::parse(n).ok_or(IndexError::InvalidArgument {
                argument: "modes",
                problem: "holds a name that is not literal, indexed_literal or semantic",
                code: ErrorCode::Unsupported,
            })
        })
        .collect()
}

fn indexed_config(opts: IndexedOptions) -> Result<IndexedOperationsConfig, IndexError> {
    let mut config = IndexedOperationsConfig::default();
    if let Some(names) = &opts.allowed_modes {
        config.allowed_modes = modes(names)?;
    }
    if let Some(stale) = opts.stale {
        let d = StalePolicy::default();
        config.stale = StalePolicy::new(
            Duration::from_millis(stale.max_age_ms.unwrap_or(d.max_age_ms())),
            stale
                .require_source_revision
                .unwrap_or(d.require_source_revision()),
        )?;
    }
    if let Some(limits) = opts.limits {
        let d = SearchLimits::default();
        config.limits = SearchLimits::new(
            limits.max_results.unwrap_or(d.max_results()),
            limits.snippet_bytes.unwrap_or(d.snippet_bytes()),
            limits
                .deadline_ms
                .map_or(d.deadline(), Duration::from_millis),
        )?;
        let u = UpdateLimits::default();
        config.update_limits = UpdateLimits::new(
            limits.max_changes.unwrap_or(u.max_changes()),
            limits.max_update_bytes.unwrap_or(u.max_bytes()),
        )?;
    }
    Ok(config)
}

/// `createIndexedRepositoryOperations(cwd, { index, fallback, allowedModes, stale, limits })`:
/// the facade. `literal` goes to `fallback` unchanged; the index modes only to `index`, behind
/// the gates. Nothing starts here: no index is built or read.
#[napi]
pub fn indexed_operations(
    cwd: String,
    index: &NativeIndex,
    fallback: &NativeOperations,
    options_json: String,
) -> napi::Result<NativeOperations> {
    let root = root_of(&cwd).map_err(thrown)?;
    let config = options(&options_json, "options")
        .and_then(indexed_config)
        .map_err(thrown)?;
    let facade = Arc::new(
        IndexedRepositoryOperations::new(
            &root,
            index.backend.clone(),
            fallback.operations.clone(),
            config,
        )
        .map_err(thrown)?,
    );
    let operations: Arc<dyn RepositoryOperations> = facade.clone();
    let spec = ToolSpec::of_operations(operations.as_ref(), &operations.modes()).map_err(thrown)?;
    Ok(NativeOperations {
        operations,
        facade: Some(facade),
        spec,
        root,
    })
}

/// The JSON reply of a search: the result with the specification's names.
fn result_reply(result: Result<index_contract::SearchResult, IndexError>) -> String {
    match result.map(|r| answer::ok_reply(&r)) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => error_reply(IndexError::BackendFailed),
        Err(e) => error_reply(e),
    }
}

#[napi]
impl NativeOperations {
    /// The modes these operations serve.
    #[napi]
    pub fn modes(&self) -> Vec<String> {
        self.operations
            .modes()
            .iter()
            .map(|m| m.as_str().to_owned())
            .collect()
    }

    /// `search(request)`: the request as JSON (without its signal, which `cancel` stands for
    /// when the caller gave one).
    #[napi]
    pub fn search<'env>(
        &self,
        env: &'env Env,
        request_json: String,
        cancel: Option<&CancelToken>,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let operations = self.operations.clone();
        let request = wire::search_request(&self.spec, &request_json);
        let signal = cancel.map_or_else(CancelSignal::new, |c| c.signal.clone());
        env.spawn_future(async move {
            let mut request = match request {
                Ok(r) => r,
                Err(e) => return Ok(error_reply(e)),
            };
            request.signal = signal;
            Ok(result_reply(operations.search(request).await))
        })
    }

    /// Runs `request_json` `times` times in Rust, one after another, and returns each run's
    /// milliseconds: the facade's own cost, which the package's benchmark sets the binding's
    /// against.
    #[napi]
    pub fn time_searches<'env>(
        &self,
        env: &'env Env,
        request_json: String,
        times: u32,
    ) -> napi::Result<PromiseRaw<'env, Vec<f64>>> {
        let operations = self.operations.clone();
        let request = wire::search_request(&self.spec, &request_json).map_err(thrown)?;
        env.spawn_future(async move {
            let mut runs = Vec::with_capacity(times as usize);
            for _ in 0..times {
                let started = Instant::now();
                let result = operations.search(request.clone()).await;
                runs.push(started.elapsed().as_secs_f64() * 1000.0);
                result.map_err(thrown)?;
            }
            Ok(runs)
        })
    }

    /// `index.update(request)`: checked against the caps, renames and deletes routed to
    /// `remove`, before the backend sees anything.
    #[napi]
    pub fn update<'env>(
        &self,
        env: &'env Env,
        request_json: String,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let facade = self.facade()?;
        let request = wire::update_request(&request_json);
        env.spawn_future(async move {
            Ok(reply(match request {
                Ok(r) => facade.index().update(r).await.map(|()| Value::Null),
                Err(e) => Err(e),
            }))
        })
    }

    /// `index.remove(request)`.
    #[napi]
    pub fn remove<'env>(
        &self,
        env: &'env Env,
        request_json: String,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let facade = self.facade()?;
        let request = wire::remove_request(&request_json);
        env.spawn_future(async move {
            Ok(reply(match request {
                Ok(r) => facade.index().remove(r).await.map(|()| Value::Null),
                Err(e) => Err(e),
            }))
        })
    }

    /// `index.status()`.
    #[napi]
    pub fn status<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, String>> {
        let facade = self.facade()?;
        env.spawn_future(async move {
            Ok(reply(
                facade.index().status().await.map(|s| status_to_js(&s)),
            ))
        })
    }

    /// `index.dispose()`: the index modes are gone afterwards; `literal` still works.
    #[napi]
    pub fn dispose<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, String>> {
        let facade = self.facade()?;
        env.spawn_future(
            async move { Ok(reply(facade.index().dispose().await.map(|()| Value::Null))) },
        )
    }

    fn facade(&self) -> napi::Result<Arc<IndexedRepositoryOperations>> {
        self.facade.clone().ok_or_else(|| {
            thrown(Failure::new(
                ErrorCode::Unsupported,
                "these operations have no index",
            ))
        })
    }
}

/// The `repo_search` tool.
#[napi]
pub struct NativeTool {
    tool: RepoSearchTool,
}

/// `createRepoSearchTool(cwd, { operations, modes })`: the tool exposing exactly `modes_json`
/// (default `["literal"]`), refused when the operations do not serve one of them, or were made
/// for another directory than `cwd`.
#[napi]
pub fn repo_search_tool(
    cwd: String,
    operations: &NativeOperations,
    modes_json: String,
) -> napi::Result<NativeTool> {
    let root = root_of(&cwd).map_err(thrown)?;
    if root != operations.root {
        return Err(thrown(Failure::new(
            ErrorCode::Unsupported,
            "cwd is not the directory the operations were made for",
        )));
    }
    let names: Vec<String> = if modes_json.is_empty() {
        vec!["literal".to_owned()]
    } else {
        serde_json::from_str(&modes_json).map_err(|_| {
            thrown(IndexError::InvalidArgument {
                argument: "modes",
                problem: "must be an array of mode names",
                code: ErrorCode::Unsupported,
            })
        })?
    };
    let modes = modes(&names).map_err(thrown)?;
    let tool = RepoSearchTool::new(operations.operations.clone(), &modes).map_err(thrown)?;
    Ok(NativeTool { tool })
}

#[napi]
impl NativeTool {
    /// `{ name, description, inputSchema, outputSchema }` as JSON.
    #[napi]
    pub fn definition(&self) -> String {
        let listing = self.tool.listing();
        json!({
            "name": listing["name"],
            "description": self.tool.description(),
            "inputSchema": self.tool.schema(),
            "outputSchema": self.tool.output_schema(),
        })
        .to_string()
    }

    /// `execute(args, { signal })`: the arguments as the input schema names them.
    #[napi]
    pub fn execute<'env>(
        &self,
        env: &'env Env,
        arguments_json: String,
        cancel: Option<&CancelToken>,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let tool = self.tool.clone();
        let signal = cancel.map_or_else(CancelSignal::new, |c| c.signal.clone());
        env.spawn_future(async move {
            let arguments: Value = match serde_json::from_str(&arguments_json) {
                Ok(v) => v,
                Err(_) => {
                    return Ok(error_reply(IndexError::InvalidArgument {
                        argument: "arguments",
                        problem: "must be a JSON object",
                        code: ErrorCode::Unsupported,
                    }));
                }
            };
            let mut request = match tool.parse_arguments(&arguments) {
                Ok(r) => r,
                Err(e) => return Ok(error_reply(e)),
            };
            request.signal = signal;
            Ok(result_reply(tool.call_request(request).await))
        })
    }
}
