//! The two traits of the seam. Both are object-safe and `Send + Sync`; their futures are boxed so
//! that `dyn RepositoryIndexBackend` works without an async-trait macro or a runtime.

use std::future::Future;
use std::pin::Pin;

use crate::{
    BackendCapabilities, BackendSearchResponse, IndexError, IndexStatus, RemoveRequest, SearchMode,
    SearchRequest, SearchResult, UpdateRequest, limits::SearchLimits,
};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a backend may fail with. Its text never reaches a caller: the facade maps every backend
/// error to [`IndexError::BackendFailed`].
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A host-owned index: persistence, build, watch and ranking are the host's; this trait is all the
/// seam sees of it.
///
/// # Cancellation
///
/// The facade drops a backend future when the request's deadline passes or its signal fires, so a
/// backend must tolerate being dropped at any await point. Backends doing blocking work should also
/// poll [`SearchRequest::signal`].
///
/// # Panics
///
/// A backend that panics inside a future is caught by the facade and reported as
/// [`IndexError::BackendPanicked`]; it does not take the host down.
pub trait RepositoryIndexBackend: Send + Sync {
    /// What the backend declares it can serve. Semantic mode is never inferred.
    fn capabilities(&self) -> BackendCapabilities;

    /// Applies `add` and `edit` changes (the facade routes renames and deletes to
    /// [`RepositoryIndexBackend::remove`] first) and commits `source_revision`.
    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>>;

    /// Drops paths.
    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>>;

    /// Answers a query, with the status of the version it searched.
    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>>;

    /// Reports the state of the committed index.
    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>>;

    /// Releases resources. The facade calls it at most once.
    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>>;
}

/// What a host without an index has: a search. The indexed facade is one too.
///
/// # Cancellation
///
/// Dropping the future abandons the search; firing [`SearchRequest::signal`] makes it return
/// promptly with what it has (literal mode) or with [`IndexError::Cancelled`] (index modes).
pub trait RepositoryOperations: Send + Sync {
    /// The modes this object can serve.
    fn modes(&self) -> Vec<SearchMode>;

    /// The caps it applies.
    fn limits(&self) -> SearchLimits;

    /// What the index modes honour: the capabilities the backend declared. `literal` honours
    /// every option whatever this says. An object without an index declares nothing.
    fn index_capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::default()
    }

    /// Answers a query.
    fn search(&self, request: SearchRequest) -> BoxFuture<'_, Result<SearchResult, IndexError>>;
}
