//! The semantic store's catch-up in a long-lived host: on a thread of its own, so that a call
//! waits for it at most its deadline.
//!
//! A first build of the store reads the whole tree (minutes on Linux). An agent's client gives a
//! tool call far less than that (the TypeScript MCP SDK gives up after 60 s), and the contract's
//! query deadline is 30 s by default. So a call that finds the store still behind at its deadline
//! is refused as the contract refuses an index that is `building` (`STALE`), and the catch-up goes
//! on for the calls after it. A one-shot host (the CLI's `search`) catches up on the calling
//! thread instead: its process would end with the call, and the catch-up with it.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use embedded_index::EmbeddedIndex;
use index_contract::{IndexError, IndexState};
use semantic_index::{CatchUp, SemanticEngine};

use crate::HostError;

/// The thread that catches a host's store up, started when a call asks and none runs, and gone
/// once no call has asked since its last catch-up began.
pub(crate) struct CatchUpWorker {
    engine: Arc<SemanticEngine>,
    index: Arc<EmbeddedIndex>,
    /// The thread that keeps MiniLM's vectors of the store's chunks, when the host runs one: told
    /// after each catch-up that changed the store, whether or not a call still waited for it.
    rerank_vectors: Option<SyncSender<()>>,
    state: Mutex<State>,
    finished: Condvar,
}

#[derive(Default)]
struct State {
    /// Catch-ups asked for so far: each call takes the next number as its ticket.
    asked: u64,
    /// The tickets the last finished catch-up answers: it began after every call up to this one
    /// had asked, so it saw at least what each of those calls' refreshes committed.
    answered: u64,
    /// Whether a thread is catching up.
    running: bool,
    /// What the last finished catch-up did.
    last: Option<Result<CatchUp, HostError>>,
}

impl CatchUpWorker {
    /// A worker for `engine`'s store beside `index`; no thread runs until a call asks.
    pub(crate) fn new(
        engine: Arc<SemanticEngine>,
        index: Arc<EmbeddedIndex>,
        rerank_vectors: Option<SyncSender<()>>,
    ) -> Arc<Self> {
        Arc::new(CatchUpWorker {
            engine,
            index,
            rerank_vectors,
            state: Mutex::default(),
            finished: Condvar::new(),
        })
    }

    /// Brings the store to the index's committed snapshot by a catch-up that begins no earlier
    /// than this call, and waits for it until `deadline`. Past the deadline the call is refused
    /// with [`IndexError::NotReady`] (`building`), and the catch-up goes on.
    pub(crate) fn catch_up_until(
        self: &Arc<Self>,
        deadline: Instant,
    ) -> Result<CatchUp, HostError> {
        let mut state = self.lock();
        state.asked += 1;
        let ticket = state.asked;
        if !state.running {
            let worker = Arc::clone(self);
            std::thread::Builder::new()
                .name("semantic-catch-up".into())
                .spawn(move || worker.run())
                .map_err(|_| HostError::IndexFailed)?;
            state.running = true;
        }
        loop {
            if state.answered >= ticket {
                return state.last.clone().unwrap_or(Err(HostError::IndexFailed));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HostError::Tool(IndexError::NotReady {
                    state: IndexState::Building,
                }));
            }
            state = self
                .finished
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Catches up while calls wait for a catch-up that began after they asked.
    fn run(&self) {
        loop {
            let ticket = {
                let mut state = self.lock();
                if state.answered >= state.asked {
                    state.running = false;
                    return;
                }
                state.asked
            };
            // A panic is this catch-up's failure, not the thread's end: the waiting calls are
            // answered, and `running` is cleared for the next call.
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                self.engine.catch_up(&self.index, None)
            }))
            .map_or(Err(HostError::IndexFailed), |r| r.map_err(HostError::from));
            if let (Ok(stats), Some(changed)) = (&result, &self.rerank_vectors)
                && *stats != CatchUp::default()
            {
                // Full: a pass is already due, and will read this store.
                let _ = changed.try_send(());
            }
            let mut state = self.lock();
            state.answered = ticket;
            state.last = Some(result);
            self.finished.notify_all();
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
