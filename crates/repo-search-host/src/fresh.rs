//! A host's own index as a backend that is never behind the worktree: what a binding plugs into
//! a facade of its own (`createEmbeddedIndex`, `createPostgresIndex` in the Node package).

use std::sync::Arc;

use index_contract::{
    BackendCapabilities, BackendError, BackendSearchResponse, BoxFuture, IndexError, IndexStatus,
    RemoveRequest, RepositoryIndexBackend, SearchMode, SearchRequest, UpdateRequest,
};

use crate::{Host, HostError};

/// A host's index, refreshed as [`Host::answer`] refreshes it: `status` first brings the index up
/// to date with the worktree (the facade asks for it before every query), and a `semantic`
/// search catches the store up too. `update`, `remove` and `dispose` go to the index unchanged.
struct FreshBackend {
    host: Arc<Host>,
    inner: Arc<dyn RepositoryIndexBackend>,
}

impl Host {
    /// This host's index as a [`RepositoryIndexBackend`] that is as fresh as the host's own
    /// answers, for a facade configured by someone else (a binding's `allowedModes` and freshness
    /// policy). `None` on a host without an index of its own (literal only, or on a `serve`).
    pub fn fresh_backend(self: &Arc<Host>) -> Option<Arc<dyn RepositoryIndexBackend>> {
        let inner = self.backend.clone()?;
        Some(Arc::new(FreshBackend {
            host: self.clone(),
            inner,
        }))
    }
}

fn boxed(e: crate::HostError) -> BackendError {
    Box::new(e)
}

impl RepositoryIndexBackend for FreshBackend {
    fn capabilities(&self) -> BackendCapabilities {
        self.inner.capabilities()
    }

    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        self.inner.update(request)
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        self.inner.remove(request)
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        Box::pin(async move {
            // The trigram index was refreshed by the `status` call before this one; the semantic
            // store is caught up only when a query reads it.
            if request.mode == SearchMode::Semantic {
                // The facade's clock started before `status` refreshed the trigram index, and
                // runs out at the request's deadline: a long-lived host stops waiting for its
                // store at four fifths of it, so that the facade hears `building` before its own
                // timer fires (unless that refresh took the last fifth).
                let deadline = request
                    .deadline
                    .map_or(self.host.deadline(), |d| d.min(self.host.deadline()));
                match self
                    .host
                    .refresh_within(SearchMode::Semantic, deadline * 4 / 5)
                    .await
                {
                    Ok(_) => {}
                    // A long-lived host whose store is still being built says so as the contract
                    // has a backend say it, by its state, so that the facade refuses the call as
                    // `STALE` (`building`) rather than as a failed backend.
                    Err(HostError::Tool(IndexError::NotReady { state })) => {
                        return Ok(BackendSearchResponse {
                            status: IndexStatus::new(state),
                            hits: Vec::new(),
                            complete: true,
                            skipped: None,
                            full_scan: false,
                        });
                    }
                    Err(e) => return Err(boxed(e)),
                }
            }
            self.inner.search(request).await
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        Box::pin(async move {
            self.host
                .refresh(SearchMode::IndexedLiteral)
                .await
                .map_err(boxed)?;
            self.inner.status().await
        })
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        self.inner.dispose()
    }
}
