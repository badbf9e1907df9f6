//! Update and remove requests: caps, ids, paths and routing, all before any backend call.

use index_contract::{
    Change, Field, IdRejection, IndexError, RemoveRequest, UpdateRequest,
    limits::{MAX_ID_BYTES, UpdateLimits},
};

use crate::path::check_field_path;

/// An update after validation and routing: the removals to apply first (deletes and the old side
/// of renames), then the update proper, which holds only `add` and `edit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedUpdate {
    /// Paths to drop before the update, if any.
    pub removals: Option<RemoveRequest>,
    /// The `add`/`edit` changes and the identity and revision they commit.
    pub update: UpdateRequest,
}

/// Checks one identifier: non-empty, at most [`MAX_ID_BYTES`], no control characters, and no URL
/// userinfo (`https://user:token@host/...`).
pub fn check_id(field: Field, id: &str) -> Result<(), IndexError> {
    let reason = if id.is_empty() {
        Some(IdRejection::Empty)
    } else if id.len() > MAX_ID_BYTES {
        Some(IdRejection::TooLong)
    } else if id.chars().any(char::is_control) {
        Some(IdRejection::ControlCharacter)
    } else if has_url_userinfo(id) {
        Some(IdRejection::Credentials)
    } else {
        None
    };
    match reason {
        Some(reason) => Err(IndexError::InvalidId { field, reason }),
        None => Ok(()),
    }
}

/// Whether any `scheme://authority` in `s` has an `@` in its authority.
fn has_url_userinfo(s: &str) -> bool {
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let after = &rest[i + 3..];
        let authority_end = after.find(['/', '?', '#']).unwrap_or(after.len());
        if after[..authority_end].contains('@') {
            return true;
        }
        rest = after;
    }
    false
}

/// Validates an update and routes it: counts and bytes first (cheapest, and the cap must hold
/// before anything is walked), then ids, then every path. `rename` becomes a removal of
/// `old_path` plus an `add` of `path`; `delete` becomes a removal.
pub fn validate_update(
    request: UpdateRequest,
    limits: &UpdateLimits,
) -> Result<RoutedUpdate, IndexError> {
    let count = request.changes.len();
    if count > limits.max_changes() {
        return Err(IndexError::TooManyChanges {
            count,
            cap: limits.max_changes(),
        });
    }
    let bytes = update_bytes(&request);
    if bytes > limits.max_bytes() {
        return Err(IndexError::UpdateTooLarge {
            bytes,
            cap: limits.max_bytes(),
        });
    }
    check_id(Field::RepositoryId, &request.repository_id)?;
    check_id(Field::WorktreeId, &request.worktree_id)?;
    check_id(Field::SourceRevision, &request.source_revision)?;

    let mut removed = Vec::new();
    let mut changes = Vec::with_capacity(count);
    for change in request.changes {
        match change {
            Change::Add { path } => {
                check_field_path(Field::Path, &path)?;
                changes.push(Change::Add { path });
            }
            Change::Edit { path } => {
                check_field_path(Field::Path, &path)?;
                changes.push(Change::Edit { path });
            }
            Change::Rename { old_path, path } => {
                check_field_path(Field::OldPath, &old_path)?;
                check_field_path(Field::Path, &path)?;
                removed.push(old_path);
                changes.push(Change::Add { path });
            }
            Change::Delete { path } => {
                check_field_path(Field::Path, &path)?;
                removed.push(path);
            }
        }
    }
    Ok(RoutedUpdate {
        removals: (!removed.is_empty()).then_some(RemoveRequest {
            paths: removed,
            update_follows: true,
        }),
        update: UpdateRequest { changes, ..request },
    })
}

/// The bytes an update carries, as the specification counts them: paths, old paths, revision, ids.
pub fn update_bytes(request: &UpdateRequest) -> usize {
    let ids =
        request.repository_id.len() + request.worktree_id.len() + request.source_revision.len();
    request.changes.iter().fold(ids, |acc, c| {
        acc + match c {
            Change::Rename { old_path, path } => old_path.len() + path.len(),
            other => other.path().len(),
        }
    })
}

/// Validates a remove request under the same caps: at most `max_changes` paths, at most
/// `max_bytes` bytes, each path contained.
pub fn validate_remove(
    request: RemoveRequest,
    limits: &UpdateLimits,
) -> Result<RemoveRequest, IndexError> {
    let count = request.paths.len();
    if count > limits.max_changes() {
        return Err(IndexError::TooManyPaths {
            count,
            cap: limits.max_changes(),
        });
    }
    let bytes: usize = request.paths.iter().map(String::len).sum();
    if bytes > limits.max_bytes() {
        return Err(IndexError::UpdateTooLarge {
            bytes,
            cap: limits.max_bytes(),
        });
    }
    for path in &request.paths {
        check_field_path(Field::Path, path)?;
    }
    Ok(request)
}
