//! A `RepositoryIndexBackend` written in JavaScript, behind the Rust facade's gates.
//!
//! The loader (`bindings/node/index.js`) wraps the host's backend object in one dispatch
//! function that takes a JSON envelope `{op, id, payload}` and always resolves to JSON text:
//! `{"ok": value}`, or `{"error": true}` when the backend threw or rejected (its words stay on
//! the JavaScript side, so no backend text can reach an error). Everything it returns is
//! untrusted: this module parses it leniently enough that a lie reaches the trust gate (a
//! non-finite score becomes NaN, which the gate refuses as `ErrorCode::Untrusted`) and
//! strictly enough that nothing malformed is served (an unknown state or a hit without a path
//! is a failure).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use index_contract::{
    BackendCapabilities, BackendError, BackendHit, BackendSearchResponse, BoxFuture, IndexState,
    IndexStatus, OutputMode, RemoveRequest, RepositoryIndexBackend, SearchRequest, UnixMillis,
    UpdateRequest,
};
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Status, bindgen_prelude::Function};
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::{Value, json};

/// The loader's dispatch function. Weak: a backend waiting for calls does not keep the process
/// alive, while a call in flight does (its promise is pending on the event loop).
pub(crate) type Dispatch = ThreadsafeFunction<String, Promise<String>, String, Status, false, true>;

/// The longest reply a backend may send: 10 000 hits (the hard cap) of 16 KiB snippets with
/// their context lines would not need more. A longer reply is refused unread.
const MAX_REPLY_BYTES: usize = 256 * 1024 * 1024;

/// A JavaScript backend: its dispatch function and the capabilities it declared when it was
/// plugged in (read once: a declaration, never re-inferred).
pub(crate) struct JsBackend {
    dispatch: Arc<Dispatch>,
    capabilities: BackendCapabilities,
    next_call: AtomicU64,
}

/// Why a JavaScript backend's call failed; its own words are never carried.
#[derive(Debug)]
pub(crate) enum JsBackendError {
    /// The backend threw or rejected.
    Threw,
    /// The call could not reach JavaScript (the environment is closing).
    Unreachable,
    /// The reply is not what the contract says the call returns.
    Malformed,
}

impl std::fmt::Display for JsBackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JsBackendError::Threw => "the JavaScript backend threw",
            JsBackendError::Unreachable => "the JavaScript backend could not be called",
            JsBackendError::Malformed => "the JavaScript backend's reply is malformed",
        })
    }
}

impl std::error::Error for JsBackendError {}

/// The capabilities a JavaScript backend declares, by the specification's camelCase names.
/// Only `true` itself declares a capability: `"yes"` or `1` is not a declaration.
pub(crate) fn declared_capabilities(json: &str) -> BackendCapabilities {
    let value: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    let flag = |name: &str| value.get(name) == Some(&Value::Bool(true));
    BackendCapabilities {
        semantic: flag("semantic"),
        regex: flag("regex"),
        file_filters: flag("fileFilters"),
        exclude_globs: flag("excludeGlobs"),
        count: flag("count"),
        context: flag("context"),
        paging: flag("paging"),
        hidden_files: flag("hiddenFiles"),
        ignored_files: flag("ignoredFiles"),
        multiline: flag("multiline"),
    }
}

impl JsBackend {
    /// Wraps the loader's dispatch function.
    pub(crate) fn new(
        dispatch: Function<String, Promise<String>>,
        capabilities: BackendCapabilities,
    ) -> napi::Result<JsBackend> {
        let dispatch = dispatch
            .build_threadsafe_function()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        Ok(JsBackend {
            dispatch: Arc::new(dispatch),
            capabilities,
            next_call: AtomicU64::new(1),
        })
    }

    /// Calls `op` with `payload` and parses the value it resolved to as a `T`. Dropping the
    /// future (the facade does at the deadline or on cancel) aborts the call's `AbortSignal`.
    async fn call<T: DeserializeOwned>(
        &self,
        op: &'static str,
        payload: Value,
    ) -> Result<T, BackendError> {
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        let envelope = json!({ "op": op, "id": id, "payload": payload }).to_string();
        let abort = AbortOnDrop {
            dispatch: self.dispatch.clone(),
            id,
            settled: AtomicBool::new(false),
        };
        let reply = async {
            let promise = self
                .dispatch
                .call_async(envelope)
                .await
                .map_err(|_| JsBackendError::Unreachable)?;
            promise.await.map_err(|_| JsBackendError::Threw)
        }
        .await;
        abort.settled.store(true, Ordering::Relaxed);
        let reply = reply?;
        if reply.len() > MAX_REPLY_BYTES {
            return Err(Box::new(JsBackendError::Malformed));
        }
        // `{"error":true}` (the backend threw) has no `ok`, and fails here as a malformed
        // reply would: either way the caller sees only `ErrorCode::Failed`.
        let reply: Reply<T> =
            serde_json::from_str(&reply).map_err(|_| JsBackendError::Malformed)?;
        Ok(reply.ok)
    }

    async fn status_now(&self) -> Result<IndexStatus, BackendError> {
        parse_status(self.call("status", Value::Null).await?)
    }
}

/// The dispatch function's reply: `{"ok": value}`.
#[derive(Deserialize)]
struct Reply<T> {
    ok: T,
}

/// Tells the loader to abort a call's `AbortSignal` when the call is dropped before it settled.
struct AbortOnDrop {
    dispatch: Arc<Dispatch>,
    id: u64,
    settled: AtomicBool,
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if !self.settled.load(Ordering::Relaxed) {
            let envelope = json!({ "op": "abort", "id": self.id }).to_string();
            // Nothing waits for the abort: a closing environment has no call to abort either.
            let _ = self
                .dispatch
                .call(envelope, ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// A status as a JavaScript backend writes it: `{ state, sourceRevision?, updatedAt? }`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsStatus {
    state: String,
    #[serde(default)]
    source_revision: Option<String>,
    #[serde(default)]
    updated_at: Option<Value>,
}

/// An unknown state fails closed (`ErrorCode::Failed`); an `updatedAt` that is not a time
/// (NaN, negative, a string) is absent, which the freshness gate refuses as stale.
fn parse_status(js: JsStatus) -> Result<IndexStatus, BackendError> {
    let state = match js.state.as_str() {
        "empty" => IndexState::Empty,
        "building" => IndexState::Building,
        "ready" => IndexState::Ready,
        "stale" => IndexState::Stale,
        "failed" => IndexState::Failed,
        _ => return Err(Box::new(JsBackendError::Malformed)),
    };
    let updated_at = js
        .updated_at
        .and_then(|v| v.as_f64())
        .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms < 9.0e15)
        .map(|ms| UnixMillis(ms as u64));
    Ok(IndexStatus {
        state,
        source_revision: js.source_revision,
        updated_at,
    })
}

/// An answer as a JavaScript backend writes it: `{ hits, status?, complete? }`.
#[derive(Deserialize)]
struct JsAnswer {
    hits: Vec<JsHit>,
    #[serde(default)]
    status: Option<JsStatus>,
    #[serde(default)]
    complete: Option<bool>,
}

#[derive(Deserialize)]
struct JsHit {
    path: String,
    #[serde(default, deserialize_with = "present")]
    line: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    column: Option<Value>,
    #[serde(default)]
    snippet: Option<String>,
    #[serde(default)]
    score: Value,
    #[serde(default)]
    count: Option<u64>,
    #[serde(default)]
    before: Vec<String>,
    #[serde(default)]
    after: Vec<String>,
}

/// A score as JSON carries it: a number. Anything else (missing, a string, or `null`, which is
/// what `JSON.stringify` makes of NaN and Infinity) is NaN, which the trust gate refuses.
fn score(value: &Value) -> f64 {
    match value {
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

/// A field that is there, even as `null`: `Some`. Absent fields take the default, `None`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A line or column: absent is 1 (the specification makes positions optional); anything but a
/// whole positive number (`null` from a NaN, a string, a fraction) is 0, which the trust gate
/// refuses.
fn position(value: Option<&Value>) -> u64 {
    match value {
        None => 1,
        Some(v) => v.as_u64().unwrap_or(0),
    }
}

/// The request as a JavaScript backend receives it, by the specification's names; the loader
/// adds the call's `signal`.
fn search_payload(request: &SearchRequest) -> Value {
    let mut payload = json!({
        "mode": request.mode.as_str(),
        "query": request.query,
        "path": request.path,
        "maxResults": request.max_results,
        "deadlineMs": request.deadline.map(|d| d.as_millis() as u64),
    });
    let extra = [
        ("regex", json!(request.regex), request.regex),
        ("multiline", json!(true), request.multiline),
        (
            "caseInsensitive",
            json!(request.case_insensitive),
            request.case_insensitive,
        ),
        (
            "glob",
            json!(request.files.globs),
            !request.files.globs.is_empty(),
        ),
        (
            "type",
            json!(request.files.types),
            !request.files.types.is_empty(),
        ),
        ("includeHidden", json!(true), request.files.include_hidden),
        ("includeIgnored", json!(true), request.files.include_ignored),
        (
            "output",
            json!(request.output.as_str()),
            request.output != OutputMode::Content,
        ),
        (
            "contextBefore",
            json!(request.context.before),
            request.context.before > 0,
        ),
        (
            "contextAfter",
            json!(request.context.after),
            request.context.after > 0,
        ),
    ];
    if let Some(map) = payload.as_object_mut() {
        // An absent field is left out, as JavaScript leaves out an optional property.
        map.retain(|_, v| !v.is_null());
        for (name, value, present) in extra {
            if present {
                map.insert(name.to_owned(), value);
            }
        }
    }
    payload
}

impl RepositoryIndexBackend for JsBackend {
    fn capabilities(&self) -> BackendCapabilities {
        self.capabilities
    }

    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let changes: Vec<Value> = request
                .changes
                .iter()
                .map(|c| json!({ "kind": kind(c), "path": c.path() }))
                .collect();
            let payload = json!({
                "repositoryId": request.repository_id,
                "worktreeId": request.worktree_id,
                "sourceRevision": request.source_revision,
                "changes": changes,
            });
            self.call::<IgnoredAny>("update", payload).await.map(drop)
        })
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.call::<IgnoredAny>("remove", json!({ "paths": request.paths }))
                .await
                .map(drop)
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        Box::pin(async move {
            let answer: JsAnswer = self.call("search", search_payload(&request)).await?;
            // A backend that does not say which version it searched is stamped with the status
            // it reports right after: never older than the hits, so never a fresher lie.
            let status = match answer.status {
                Some(status) => parse_status(status)?,
                None => self.status_now().await?,
            };
            let asked = request.max_results.unwrap_or(usize::MAX);
            // Unsaid, an answer is complete only when it is short of what was asked for.
            let complete = answer.complete.unwrap_or(answer.hits.len() < asked);
            let hits = answer
                .hits
                .into_iter()
                .map(|h| BackendHit {
                    score: score(&h.score),
                    path: h.path,
                    line: position(h.line.as_ref()),
                    column: position(h.column.as_ref()),
                    snippet: h.snippet.unwrap_or_default(),
                    count: h.count,
                    before: h.before,
                    after: h.after,
                })
                .collect();
            Ok(BackendSearchResponse {
                status,
                hits,
                complete,
                skipped: None,
                full_scan: false,
            })
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        Box::pin(self.status_now())
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.call::<IgnoredAny>("dispose", Value::Null)
                .await
                .map(drop)
        })
    }
}

fn kind(change: &index_contract::Change) -> &'static str {
    match change {
        index_contract::Change::Add { .. } => "add",
        index_contract::Change::Edit { .. } => "edit",
        index_contract::Change::Rename { .. } => "rename",
        index_contract::Change::Delete { .. } => "delete",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_true_declares_a_capability() {
        let c = declared_capabilities(r#"{"semantic":"yes","regex":true,"count":1}"#);
        assert!(!c.semantic && c.regex && !c.count);
        assert_eq!(
            declared_capabilities("null"),
            BackendCapabilities::default()
        );
    }

    #[test]
    fn statuses_fail_closed() {
        let check = |v: Value| {
            serde_json::from_value::<JsStatus>(v)
                .map_err(|_| ())
                .and_then(|js| parse_status(js).map_err(|_| ()))
                .map(|s| (s.state, s.updated_at))
        };
        assert!(check(json!({"state": "warm"})).is_err());
        assert!(check(json!({})).is_err());
        assert_eq!(
            check(json!({"state": "ready", "updatedAt": 5})).unwrap(),
            (IndexState::Ready, Some(UnixMillis(5)))
        );
        for bad in [json!("NaN"), json!(-1), json!("2026-01-01")] {
            assert_eq!(
                check(json!({"state": "ready", "updatedAt": bad})).unwrap(),
                (IndexState::Ready, None)
            );
        }
    }

    #[test]
    fn scores_and_positions_json_cannot_carry_reach_the_gate_as_refusable() {
        assert!(score(&json!("0.5")).is_nan());
        assert!(score(&Value::Null).is_nan());
        assert_eq!(position(None), 1);
        assert_eq!(position(Some(&Value::Null)), 0);
        assert_eq!(position(Some(&json!(1.5))), 0);
        assert_eq!(position(Some(&json!(7))), 7);
        assert_eq!(score(&json!(0.5)), 0.5);
    }
}
