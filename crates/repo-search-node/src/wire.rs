//! The JavaScript names of the seam's types: requests in, answers and errors out.
//!
//! Everything crosses the boundary as JSON text, parsed here by serde: one copy each way, no
//! walk of JavaScript objects through Node-API calls, and one place where the names are mapped.
//! The specification's names are camelCase (`maxResults`, `deadlineMs`, `sourceRevision`,
//! `updatedAt`), except `untrusted_index`, which it spells so; the Rust wire names are snake_case.

use std::time::Duration;

use index_contract::{
    Change, ErrorCode, IndexError, IndexStatus, RemoveRequest, SearchRequest, UpdateRequest,
    limits::HARD_DEADLINE_MS,
};
use repo_search_tool::ToolSpec;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// A request's JavaScript names and the tool arguments they stand for. Any other name is refused,
/// so that a misspelt option is an error, never silently ignored.
const REQUEST_NAMES: &[(&str, &str)] = &[
    ("query", "query"),
    ("mode", "mode"),
    ("path", "path"),
    ("maxResults", "max_results"),
    ("caseInsensitive", "case_insensitive"),
    ("regex", "regex"),
    ("multiline", "multiline"),
    ("glob", "glob"),
    ("type", "type"),
    ("includeHidden", "include_hidden"),
    ("includeIgnored", "include_ignored"),
    ("output", "output"),
    ("contextBefore", "context_before"),
    ("contextAfter", "context_after"),
    ("offset", "offset"),
    ("pageToken", "page_token"),
];

/// Builds the request a `search(request)` call stands for: the JavaScript names mapped to the
/// tool's arguments and checked by the tool's rules (one home for them), then `deadlineMs`.
pub(crate) fn search_request(spec: &ToolSpec, json: &str) -> Result<SearchRequest, IndexError> {
    let Ok(Value::Object(request)) = serde_json::from_str::<Value>(json) else {
        return Err(invalid("request", "must be an object"));
    };
    let mut arguments = Map::new();
    let mut deadline = None;
    for (name, value) in request {
        if name == "deadlineMs" {
            deadline = Some(deadline_ms(&value)?);
            continue;
        }
        let Some((_, argument)) = REQUEST_NAMES.iter().find(|(js, _)| *js == name) else {
            return Err(invalid(
                "request",
                "has a property a request does not take; index.d.ts lists them",
            ));
        };
        arguments.insert((*argument).to_owned(), value);
    }
    let mut request = spec
        .parse_arguments(&Value::Object(arguments))
        .map_err(js_names)?;
    request.deadline = deadline;
    Ok(request)
}

/// An argument error of the tool's parser, naming the argument as JavaScript spells it.
fn js_names(e: IndexError) -> IndexError {
    match e {
        IndexError::InvalidArgument {
            argument,
            problem,
            code,
        } => IndexError::InvalidArgument {
            argument: REQUEST_NAMES
                .iter()
                .find(|(_, wire)| *wire == argument)
                .map_or(argument, |(js, _)| js),
            problem,
            code,
        },
        other => other,
    }
}

/// `deadlineMs`: a whole number of milliseconds from 1 to the hard cap.
fn deadline_ms(value: &Value) -> Result<Duration, IndexError> {
    match value.as_u64() {
        Some(ms @ 1..=HARD_DEADLINE_MS) => Ok(Duration::from_millis(ms)),
        Some(_) => Err(IndexError::InvalidArgument {
            argument: "deadlineMs",
            problem: "is outside 1..=120000",
            code: ErrorCode::Limit,
        }),
        None => Err(invalid(
            "deadlineMs",
            "must be a whole number of milliseconds",
        )),
    }
}

fn invalid(argument: &'static str, problem: &'static str) -> IndexError {
    IndexError::InvalidArgument {
        argument,
        problem,
        code: ErrorCode::Unsupported,
    }
}

/// An update as the specification writes it: `{ repositoryId, worktreeId, sourceRevision,
/// changes }`, each change `{ kind, path }` or, for a rename, `{ kind: "rename", oldPath, path }`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JsUpdate {
    repository_id: String,
    worktree_id: String,
    source_revision: String,
    changes: Vec<JsChange>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum JsChange {
    Add {
        path: String,
    },
    Edit {
        path: String,
    },
    Rename {
        #[serde(rename = "oldPath")]
        old_path: String,
        path: String,
    },
    Delete {
        path: String,
    },
}

/// Parses `index.update(request)`'s argument.
pub(crate) fn update_request(json: &str) -> Result<UpdateRequest, IndexError> {
    let js: JsUpdate = serde_json::from_str(json)
        .map_err(|_| invalid("update", "must be { repositoryId, worktreeId, sourceRevision, changes } with each change { kind, path } (a rename also oldPath)"))?;
    Ok(UpdateRequest {
        repository_id: js.repository_id,
        worktree_id: js.worktree_id,
        source_revision: js.source_revision,
        changes: js
            .changes
            .into_iter()
            .map(|c| match c {
                JsChange::Add { path } => Change::Add { path },
                JsChange::Edit { path } => Change::Edit { path },
                JsChange::Rename { old_path, path } => Change::Rename { old_path, path },
                JsChange::Delete { path } => Change::Delete { path },
            })
            .collect(),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsRemove {
    paths: Vec<String>,
}

/// Parses `index.remove(request)`'s argument: `{ paths }`.
pub(crate) fn remove_request(json: &str) -> Result<RemoveRequest, IndexError> {
    let js: JsRemove =
        serde_json::from_str(json).map_err(|_| invalid("remove", "must be { paths: string[] }"))?;
    Ok(RemoveRequest::new(js.paths))
}

/// A snake_case wire value with the specification's camelCase names, `untrusted_index` kept.
pub(crate) fn to_js(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let k = if k == "untrusted_index" { k } else { camel(&k) };
                    (k, to_js(v))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(to_js).collect()),
        other => other,
    }
}

fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// An index status with the specification's names.
pub(crate) fn status_to_js(status: &IndexStatus) -> Value {
    to_js(serde_json::to_value(status).unwrap_or(Value::Null))
}

/// Why a call failed, as JavaScript sees it: a stable code and fixed words. Never a backend's,
/// git's or the operating system's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    code: ErrorCode,
    message: String,
}

impl Failure {
    /// A failure of the binding or the host, in its own fixed words.
    pub(crate) fn new(code: ErrorCode, message: &'static str) -> Failure {
        Failure {
            code,
            message: message.to_owned(),
        }
    }
}

impl From<IndexError> for Failure {
    fn from(e: IndexError) -> Failure {
        Failure {
            code: e.code(),
            message: e.to_string(),
        }
    }
}

/// The reply of every call: `{"ok": value}` or `{"error": {"code", "message"}}`, which the loader
/// turns into a value or a thrown `IndexError`.
pub(crate) fn reply(result: Result<Value, IndexError>) -> String {
    match result {
        Ok(value) => json!({ "ok": value }).to_string(),
        Err(e) => error_reply(e),
    }
}

/// The reply of a failed call.
pub(crate) fn error_reply(e: impl Into<Failure>) -> String {
    let f = e.into();
    json!({ "error": { "code": f.code.as_str(), "message": f.message } }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use index_contract::BackendCapabilities;
    use index_contract::{SearchMode, limits::SearchLimits};

    fn spec() -> ToolSpec {
        ToolSpec::new(
            &[SearchMode::Literal, SearchMode::IndexedLiteral],
            SearchLimits::default(),
            BackendCapabilities::default(),
        )
        .unwrap()
    }

    fn check_request(json: &str, expected: Result<(&str, Option<usize>, Option<u64>), ErrorCode>) {
        let got = search_request(&spec(), json).map(|r| {
            (
                r.mode.as_str().to_owned(),
                r.max_results,
                r.deadline.map(|d| d.as_millis() as u64),
            )
        });
        match (got, expected) {
            (Ok((mode, max, deadline)), Ok((m, x, d))) => {
                assert_eq!((mode.as_str(), max, deadline), (m, x, d), "{json}")
            }
            (Err(e), Err(code)) => assert_eq!(e.code(), code, "{json}"),
            (got, expected) => panic!("{json}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn requests_take_the_specification_names_and_nothing_else() {
        check_request(r#"{"query":"a"}"#, Ok(("literal", None, None)));
        check_request(
            r#"{"query":"a","mode":"indexed_literal","maxResults":5,"deadlineMs":900}"#,
            Ok(("indexed_literal", Some(5), Some(900))),
        );
        // The Rust wire names are not the JavaScript ones.
        check_request(
            r#"{"query":"a","max_results":5}"#,
            Err(ErrorCode::Unsupported),
        );
        check_request(r#"{"query":"a","maxResults":0}"#, Err(ErrorCode::Limit));
        check_request(
            r#"{"query":"a","maxResults":null}"#,
            Err(ErrorCode::Unsupported),
        );
        check_request(
            r#"{"query":"a","deadlineMs":120001}"#,
            Err(ErrorCode::Limit),
        );
        check_request(
            r#"{"query":"a","deadlineMs":-1}"#,
            Err(ErrorCode::Unsupported),
        );
        check_request(
            r#"{"query":"a","deadlineMs":1.5}"#,
            Err(ErrorCode::Unsupported),
        );
        check_request(
            r#"{"query":"a","mode":"semantic"}"#,
            Err(ErrorCode::Unsupported),
        );
        check_request(r#"[1]"#, Err(ErrorCode::Unsupported));
    }

    #[test]
    fn answers_carry_camel_case_names_and_untrusted_index_as_the_specification_spells_it() {
        let wire = json!({
            "untrusted_index": true,
            "indexed": {"source_revision": "r", "updated_at": 5},
            "hits": [{"snippet_truncated": false, "snippet": "a_b"}],
            "stats": {"files_skipped": {"non_utf8_path": 0}},
        });
        assert_eq!(
            to_js(wire),
            json!({
                "untrusted_index": true,
                "indexed": {"sourceRevision": "r", "updatedAt": 5},
                "hits": [{"snippetTruncated": false, "snippet": "a_b"}],
                "stats": {"filesSkipped": {"nonUtf8Path": 0}},
            })
        );
    }

    #[test]
    fn updates_route_the_specification_change_kinds() {
        let u = update_request(
            r#"{"repositoryId":"r","worktreeId":"w","sourceRevision":"s","changes":[
                {"kind":"add","path":"a"},{"kind":"rename","oldPath":"b","path":"c"}]}"#,
        )
        .unwrap();
        assert_eq!(
            u.changes,
            vec![
                Change::Add { path: "a".into() },
                Change::Rename {
                    old_path: "b".into(),
                    path: "c".into()
                }
            ]
        );
        assert!(update_request(r#"{"changes":[]}"#).is_err());
        assert!(remove_request(r#"{"paths":["a"],"x":1}"#).is_err());
    }
}
