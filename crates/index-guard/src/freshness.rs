//! The freshness gate: may this status be served?

use index_contract::{
    IndexError, IndexState, IndexStatus, UnixMillis,
    limits::{CLOCK_SKEW_ALLOWANCE_MS, MAX_ID_BYTES, StalePolicy},
};

/// Decides whether an index with `status` may answer a query at time `now`.
///
/// Order matters only for which error is reported: `failed` first (a failed index is not merely
/// stale), then the state, then the timestamp, then the revision.
pub fn check_freshness(
    status: &IndexStatus,
    policy: &StalePolicy,
    now: UnixMillis,
) -> Result<(), IndexError> {
    match status.state {
        IndexState::Failed => return Err(IndexError::IndexFailed),
        IndexState::Empty | IndexState::Building | IndexState::Stale => {
            return Err(IndexError::NotReady {
                state: status.state,
            });
        }
        IndexState::Ready => {}
    }
    let Some(updated_at) = status.updated_at else {
        return Err(IndexError::NoUpdatedAt);
    };
    if updated_at.0 > now.0.saturating_add(CLOCK_SKEW_ALLOWANCE_MS) {
        return Err(IndexError::UpdatedInFuture);
    }
    let age_ms = now.0.saturating_sub(updated_at.0);
    if age_ms > policy.max_age_ms() {
        return Err(IndexError::TooOld {
            age_ms,
            max_age_ms: policy.max_age_ms(),
        });
    }
    match status.source_revision.as_deref() {
        None | Some("") if policy.require_source_revision() => {
            return Err(IndexError::NoSourceRevision);
        }
        Some(rev) if !revision_is_printable(rev) => return Err(IndexError::UntrustedRevision),
        _ => {}
    }
    Ok(())
}

/// A served revision is backend text that reaches the caller in provenance, so it must be a
/// bounded id without control characters.
fn revision_is_printable(rev: &str) -> bool {
    rev.len() <= MAX_ID_BYTES && !rev.chars().any(char::is_control)
}

/// Parses a status that arrived as JSON (from an out-of-process backend, say). Anything that does
/// not parse, including a state outside the frozen five, fails closed as
/// [`IndexError::StatusUnreadable`].
pub fn parse_status(json: &[u8]) -> Result<IndexStatus, IndexError> {
    serde_json::from_slice(json).map_err(|_| IndexError::StatusUnreadable)
}
