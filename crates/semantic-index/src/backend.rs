//! The trigram index and the semantic store behind one [`RepositoryIndexBackend`] that
//! declares `capabilities.semantic`: `semantic` requests go to the store, every other request
//! to the embedded index, and every update to both.

use std::sync::Arc;
use std::time::{Duration, Instant};

use embedded_index::EmbeddedIndex;
use index_contract::limits::HARD_DEADLINE_MS;
use index_contract::{
    BackendCapabilities, BackendError, BackendSearchResponse, BoxFuture, IndexState, IndexStatus,
    RemoveRequest, RepositoryIndexBackend, SearchMode, SearchRequest, UpdateRequest,
};

use crate::engine::SemanticEngine;

/// The embedded index and the semantic store as one backend.
pub struct CompositeBackend {
    /// The trigram index, which answers every mode but `semantic` and whose committed snapshot
    /// the store follows.
    pub index: Arc<EmbeddedIndex>,
    /// The semantic engine, which answers `semantic`.
    pub semantic: Arc<SemanticEngine>,
}

impl CompositeBackend {
    pub(crate) fn catch_up(&self) -> Result<(), BackendError> {
        self.semantic.catch_up(&self.index, None)?;
        Ok(())
    }
}

impl RepositoryIndexBackend for CompositeBackend {
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities {
            semantic: true,
            ..self.index.capabilities()
        }
    }

    /// One update covers both: the embedded index commits, then the store catches up to it.
    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.index.update(request).await?;
            self.catch_up()
        })
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            self.index.remove(request).await?;
            self.catch_up()
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        if request.mode != SearchMode::Semantic {
            return self.index.search(request);
        }
        Box::pin(async move {
            // The catch-up below waits for the store's writer at most a fifth of the call's
            // deadline (no deadline is the hard cap). The facade's clock started earlier, before
            // its `status` refresh and a host's own wait for the store, and a writer that holds
            // the store longer than that is building it, not committing a few files: the call
            // then ends as `STALE` within its deadline.
            let cap = Duration::from_millis(HARD_DEADLINE_MS);
            let deadline = Instant::now() + request.deadline.unwrap_or(cap).min(cap) / 5;
            let head = self.index.committed_head();
            let ready = head.status.state == IndexState::Ready;
            let root = self.index.root();
            let answer = self.semantic.search(
                &request,
                head.status,
                head.digest,
                &head.unservable,
                None,
                root,
            )?;
            if !(ready && answer.status.state == IndexState::Stale) {
                return Ok(answer);
            }
            // The store lags the index's newest commit: this process died before it caught up,
            // or (agents call tools in parallel) another process committed a newer view of the
            // worktree after this host caught the store up, or caught the store up to its own
            // older view. Catch up to the newest commit and answer from exactly the store
            // version and index status of that commit. A stale store is never served. (On this
            // thread, as `update` catches up: usually a few files, and `block_in_place` would
            // panic on a current-thread runtime.)
            let pinned = self.semantic.catch_up_pinned(&self.index, Some(deadline));
            match pinned {
                Ok((Some(p), _)) => self.semantic.search(
                    &request,
                    p.status,
                    p.digest,
                    &p.unservable,
                    Some(p.store),
                    root,
                ),
                Ok((None, _)) => Ok(answer),
                // Another writer (a long build, perhaps in another process) holds the store past
                // the deadline: the answer stays the stale one, which the gate refuses as STALE,
                // so the call ends by its deadline and is asked again, and the worker thread it
                // runs on is not held for that build.
                Err(crate::StoreError::Busy) => Ok(answer),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        self.index.status()
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        self.index.dispose()
    }
}
