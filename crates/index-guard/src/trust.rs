//! The trust gate: index output is checked before anyone sees it.

use std::collections::HashSet;

use index_contract::{
    BackendHit, ContextLines, Field, IndexError, IndexStatus, OutputMode, Provenance, SearchHit,
    SearchMode, SearchResult, SearchStats, StopReason,
};

use crate::path::{Scope, check_path};
use crate::snippet::truncate_str;

/// What the trust gate checks hits against.
#[derive(Debug, Clone, Copy)]
pub struct TrustContext<'a> {
    /// The requested scope; every hit must lie inside it.
    pub scope: &'a Scope,
    /// The result cap for this query (already clamped).
    pub max_results: usize,
    /// The snippet cap in bytes; context lines are cut to it too.
    pub snippet_bytes: usize,
    /// What each hit stands for: with `count`, every hit must carry one, and otherwise none may.
    pub output: OutputMode,
    /// The context asked for: no hit may carry more lines on either side.
    pub context: ContextLines,
}

/// Hits that passed the gate.
#[derive(Debug, Clone, PartialEq)]
pub struct TrustedHits {
    /// The hits, in the backend's order, deduplicated, capped, snippets cut.
    pub hits: Vec<SearchHit>,
    /// Whether hits were cut to the cap.
    pub capped: bool,
    /// How many hits the backend returned.
    pub backend_hits: u64,
    /// How many were dropped as repeats of an earlier path.
    pub duplicates_removed: u64,
}

/// Checks every hit a backend returned.
///
/// Every hit is checked, including those past the cap: one hostile path or score anywhere fails
/// the whole query closed, since a backend that lies once is not trusted for the rest.
/// Then duplicates are dropped (first wins), the list is cut to the cap, and snippets are cut on a
/// UTF-8 boundary.
pub fn validate_hits(
    hits: Vec<BackendHit>,
    ctx: &TrustContext<'_>,
) -> Result<TrustedHits, IndexError> {
    for hit in &hits {
        check_path(&hit.path).map_err(|reason| IndexError::UntrustedPath {
            field: Field::HitPath,
            reason,
        })?;
        if !ctx.scope.contains(&hit.path) {
            return Err(IndexError::UntrustedPath {
                field: Field::HitPath,
                reason: index_contract::PathRejection::OutsideScope,
            });
        }
        if !hit.score.is_finite() || !(0.0..=1.0).contains(&hit.score) {
            return Err(IndexError::UntrustedScore);
        }
        if hit.line == 0 || hit.column == 0 {
            return Err(IndexError::UntrustedPosition);
        }
        check_detail(hit, ctx)?;
    }
    let backend_hits = hits.len() as u64;
    let mut seen: HashSet<String> = HashSet::with_capacity(hits.len().min(ctx.max_results * 2));
    let mut out = Vec::with_capacity(hits.len().min(ctx.max_results));
    let mut duplicates_removed = 0u64;
    let mut capped = false;
    for hit in hits {
        if seen.contains(&hit.path) {
            duplicates_removed += 1;
            continue;
        }
        if out.len() == ctx.max_results {
            // Past the cap we only count duplicates no further: the answer is already cut.
            capped = true;
            break;
        }
        seen.insert(hit.path.clone());
        let (snippet, snippet_truncated) = match truncate_str(&hit.snippet, ctx.snippet_bytes) {
            (_, false) => (hit.snippet, false),
            (cut, true) => (cut.to_owned(), true),
        };
        let cut = |lines: Vec<String>| {
            lines
                .into_iter()
                .map(|l| truncate_str(&l, ctx.snippet_bytes).0.to_owned())
                .collect::<Vec<_>>()
        };
        let with_context = ctx.context.any();
        out.push(SearchHit {
            path: hit.path,
            line: hit.line,
            column: hit.column,
            snippet,
            snippet_truncated,
            score: Some(hit.score),
            count: hit.count,
            before: with_context.then(|| cut(hit.before)),
            after: with_context.then(|| cut(hit.after)),
        });
    }
    Ok(TrustedHits {
        hits: out,
        capped,
        backend_hits,
        duplicates_removed,
    })
}

/// A hit's count and context against the request.
fn check_detail(hit: &BackendHit, ctx: &TrustContext<'_>) -> Result<(), IndexError> {
    let count_ok = match (ctx.output, hit.count) {
        (OutputMode::Count, Some(n)) => n >= 1,
        (OutputMode::Count, None) => false,
        (_, count) => count.is_none(),
    };
    let before = hit.before.len() as u64;
    let context_ok = before <= u64::from(ctx.context.before)
        && before < hit.line
        && hit.after.len() as u64 <= u64::from(ctx.context.after)
        && !hit
            .before
            .iter()
            .chain(&hit.after)
            .any(|l| l.contains('\n'));
    if count_ok && context_ok {
        Ok(())
    } else {
        Err(IndexError::UntrustedHitDetail)
    }
}

/// Builds the answer for an index mode: the trusted hits, stamped with the provenance of the
/// version they were read from and `untrusted_index: true`.
pub fn stamp(
    mode: SearchMode,
    status: &IndexStatus,
    trusted: TrustedHits,
    backend_complete: bool,
) -> SearchResult {
    let complete = backend_complete && !trusted.capped;
    SearchResult {
        mode,
        hits: trusted.hits,
        complete,
        // A backend that stopped early stopped at a cap: an answer past the deadline is a
        // timeout before it gets here.
        stopped: (!complete).then_some(StopReason::MaxResults),
        stats: SearchStats {
            backend_hits: Some(trusted.backend_hits),
            duplicates_removed: Some(trusted.duplicates_removed),
            ..SearchStats::default()
        },
        indexed: Some(Provenance {
            mode,
            state: status.state,
            source_revision: status.source_revision.clone(),
            updated_at: status.updated_at,
        }),
        untrusted_index: Some(true),
        next_offset: None,
        page_token: None,
    }
}
