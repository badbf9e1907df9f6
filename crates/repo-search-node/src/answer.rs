//! A [`SearchResult`] written straight to JSON text with the specification's names.
//!
//! The result of a query can hold 10 000 hits, so it is serialised once, from borrowed fields,
//! rather than built as a `serde_json::Value` and renamed (four times slower on 1000 hits). Each
//! struct here destructures its wire twin without `..`, so that a field added to the contract
//! fails to compile here until it is given its JavaScript name; `to_js` stays the definition,
//! and a test holds the two equal.

use index_contract::{
    IndexState, Provenance, SearchHit, SearchMode, SearchResult, SearchStats, SkippedFiles,
    StopReason, UnixMillis,
};
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsResult<'a> {
    mode: SearchMode,
    hits: Vec<JsHit<'a>>,
    complete: bool,
    stopped: Option<StopReason>,
    stats: JsStats,
    #[serde(skip_serializing_if = "Option::is_none")]
    indexed: Option<JsProvenance<'a>>,
    #[serde(rename = "untrusted_index", skip_serializing_if = "Option::is_none")]
    untrusted_index: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_token: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsHit<'a> {
    path: &'a str,
    line: u64,
    column: u64,
    snippet: &'a str,
    snippet_truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<&'a [String]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    files_searched: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    files_skipped: Option<JsSkipped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    backend_hits: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicates_removed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    full_scan: Option<bool>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsSkipped {
    binary: u64,
    non_utf8_path: u64,
    unreadable: u64,
    not_reached: u64,
    #[serde(skip_serializing_if = "is_zero")]
    refused_path: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsProvenance<'a> {
    mode: SearchMode,
    state: IndexState,
    source_revision: Option<&'a str>,
    updated_at: Option<UnixMillis>,
}

fn hit(h: &SearchHit) -> JsHit<'_> {
    let SearchHit {
        path,
        line,
        column,
        snippet,
        snippet_truncated,
        score,
        count,
        before,
        after,
    } = h;
    JsHit {
        path,
        line: *line,
        column: *column,
        snippet,
        snippet_truncated: *snippet_truncated,
        score: *score,
        count: *count,
        before: before.as_deref(),
        after: after.as_deref(),
    }
}

fn stats(s: &SearchStats) -> JsStats {
    let SearchStats {
        files_searched,
        files_skipped,
        backend_hits,
        duplicates_removed,
        full_scan,
    } = *s;
    JsStats {
        files_searched,
        files_skipped: files_skipped.map(|k| {
            let SkippedFiles {
                binary,
                non_utf8_path,
                unreadable,
                not_reached,
                refused_path,
            } = k;
            JsSkipped {
                binary,
                non_utf8_path,
                unreadable,
                not_reached,
                refused_path,
            }
        }),
        backend_hits,
        duplicates_removed,
        full_scan,
    }
}

fn provenance(p: &Provenance) -> JsProvenance<'_> {
    let Provenance {
        mode,
        state,
        source_revision,
        updated_at,
    } = p;
    JsProvenance {
        mode: *mode,
        state: *state,
        source_revision: source_revision.as_deref(),
        updated_at: *updated_at,
    }
}

/// The `{"ok": result}` reply of a search, with the specification's names.
pub(crate) fn ok_reply(result: &SearchResult) -> Result<String, serde_json::Error> {
    let SearchResult {
        mode,
        hits,
        complete,
        stopped,
        stats: s,
        indexed,
        untrusted_index,
        next_offset,
        page_token,
    } = result;
    #[derive(Serialize)]
    struct Reply<'a> {
        ok: JsResult<'a>,
    }
    serde_json::to_string(&Reply {
        ok: JsResult {
            mode: *mode,
            hits: hits.iter().map(hit).collect(),
            complete: *complete,
            stopped: *stopped,
            stats: stats(s),
            indexed: indexed.as_ref().map(provenance),
            untrusted_index: *untrusted_index,
            next_offset: *next_offset,
            page_token: page_token.as_deref(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::to_js;

    fn every_field() -> SearchResult {
        SearchResult {
            mode: SearchMode::IndexedLiteral,
            hits: vec![SearchHit {
                path: "a_b/c.rs".into(),
                line: 3,
                column: 4,
                snippet: "let snake_case = 1;".into(),
                snippet_truncated: true,
                score: Some(0.5),
                count: Some(2),
                before: Some(vec!["x".into()]),
                after: Some(vec!["y".into()]),
            }],
            complete: false,
            stopped: Some(StopReason::MaxResults),
            stats: SearchStats {
                files_searched: Some(1),
                files_skipped: Some(SkippedFiles {
                    binary: 1,
                    non_utf8_path: 2,
                    unreadable: 3,
                    not_reached: 4,
                    refused_path: 5,
                }),
                backend_hits: Some(6),
                duplicates_removed: Some(7),
                full_scan: Some(true),
            },
            indexed: Some(Provenance {
                mode: SearchMode::IndexedLiteral,
                state: IndexState::Ready,
                source_revision: Some("rev".into()),
                updated_at: Some(UnixMillis(9)),
            }),
            untrusted_index: Some(true),
            next_offset: Some(1),
            page_token: Some("tok".into()),
        }
    }

    #[test]
    fn the_fast_reply_equals_the_renamed_wire_value() {
        let mut sparse = every_field();
        sparse.hits[0].before = None;
        sparse.stats = SearchStats::default();
        sparse.indexed = None;
        sparse.untrusted_index = None;
        sparse.page_token = None;
        for result in [every_field(), sparse] {
            let fast: serde_json::Value =
                serde_json::from_str(&ok_reply(&result).unwrap()).unwrap();
            let wire = serde_json::to_value(&result).unwrap();
            assert_eq!(fast["ok"], to_js(wire));
        }
    }
}
