//! Which modes may be served.

use index_contract::{BackendCapabilities, IndexError, SearchMode};

/// Checks that `mode` is allowed by the host and, for `semantic`, declared by the backend.
pub fn check_mode(
    mode: SearchMode,
    allowed: &[SearchMode],
    capabilities: BackendCapabilities,
) -> Result<(), IndexError> {
    if !allowed.contains(&mode) {
        return Err(IndexError::ModeNotAllowed { mode });
    }
    if mode == SearchMode::Semantic && !capabilities.semantic {
        return Err(IndexError::SemanticNotDeclared);
    }
    Ok(())
}
