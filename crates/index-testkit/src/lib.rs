//! Fixture backends for the `repo_search` seam: one configurable [`FixtureBackend`] whose
//! [`Behaviour`] picks how it misbehaves (or does not), with call counters so tests can prove that
//! a refusal happened before any backend call.
//!
//! It is dev-only: the seam is what is under test here, so a fixture stands in for a real index.
//! Its `search` is a real substring scan over the files it holds, so a `ready` fixture returns
//! honest hits.
//!
//! It also holds what several crates' tests share: [`tree`] generates git worktrees full of
//! awkward cases, [`rg`] runs the pinned ripgrep as the oracle for what a literal search
//! finds, [`pg`] runs a test binary in a throwaway PostgreSQL cluster, [`rss`] measures a call's
//! peak resident memory (what a mapped or read index file costs), and [`fuzz`] replays the fuzz
//! targets' committed inputs. With the `conformance` feature, `conformance` is the suite every
//! index backend runs against itself.
//!
//! # Example
//!
//! ```
//! use index_testkit::{Behaviour, FixtureBackend};
//! use index_contract::RepositoryIndexBackend;
//!
//! let backend = FixtureBackend::ready([("src/main.rs", "fn main() {}\n")]);
//! assert!(!backend.capabilities().semantic);
//! let failing = FixtureBackend::ready([("a", "x")]).with_behaviour(Behaviour::Panic);
//! assert_eq!(failing.calls().search, 0);
//! ```
#![deny(missing_docs)]

pub mod alloc;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod fuzz;
pub mod rss;
/// The Linux 6.12 queries the index benchmarks time (`index-bench`, `pg_probe`), shared so that
/// their figures compare.
pub mod linux_queries {
    /// Identifiers found in a handful of files.
    pub const RARE: [&str; 5] = [
        "SYSCALL_DEFINE3(fchmodat",
        "kvm_vcpu_ioctl_set_cpuid2",
        "ZSTD_decompressStream",
        "xhci_ring_ep_doorbell",
        "btrfs_free_reserved_data_space",
    ];
    /// Literals found in thousands of files.
    pub const COMMON: [&str; 3] = ["EXPORT_SYMBOL_GPL(", "return -EINVAL;", "static int"];
    /// Selective regexes: the trigram plan must narrow them to few candidates. The first is the
    /// one `cargo xtask bench` also times with csearch and rg.
    pub const REGEX: [&str; 3] = [
        r"fn\s+new_[a-z]+\(",
        r"static\s+int\s+[a-z_]+_probe\(",
        r"(kvm|xen)_[a-z]+_msr_(read|write)",
    ];
}
pub mod pg;
pub mod rg;
pub mod tree;

/// The `p` quantile (0 to 1) of `v` by the nearest rank, as the benchmarks and probes quote
/// medians and tails. Panics on an empty `v`.
pub fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use index_contract::{
    BackendCapabilities, BackendError, BackendHit, BackendSearchResponse, BoxFuture, Change,
    IndexState, IndexStatus, RemoveRequest, RepositoryIndexBackend, SearchRequest, UnixMillis,
    UpdateRequest,
};

/// How a fixture answers `search` (and, for some, `status`).
#[derive(Debug, Clone, PartialEq)]
pub enum Behaviour {
    /// Answers honestly from its files.
    Honest,
    /// Reports this status instead of its own, on `status` and in search responses.
    Status(IndexStatus),
    /// Honest `status`, but the search response attests this status: a concurrent update happened
    /// between the two, or the backend lies about the version it searched.
    ResponseStatus(IndexStatus),
    /// Returns these hits, whatever the query.
    Hits(Vec<BackendHit>),
    /// Returns an error whose text must never reach a caller.
    Error(String),
    /// Panics inside the search future.
    Panic,
    /// Panics inside the status future.
    PanicInStatus,
    /// Sleeps this long before answering (it never checks the signal).
    Slow(Duration),
    /// Never answers.
    Never,
}

/// How many times each method was called.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calls {
    /// `update` calls.
    pub update: usize,
    /// `remove` calls.
    pub remove: usize,
    /// `search` calls.
    pub search: usize,
    /// `status` calls.
    pub status: usize,
    /// `dispose` calls.
    pub dispose: usize,
}

#[derive(Debug, Default)]
struct Counters {
    update: AtomicUsize,
    remove: AtomicUsize,
    search: AtomicUsize,
    status: AtomicUsize,
    dispose: AtomicUsize,
}

#[derive(Debug)]
struct State {
    files: BTreeMap<String, String>,
    status: IndexStatus,
    updates: Vec<UpdateRequest>,
    removals: Vec<RemoveRequest>,
}

/// A configurable in-memory backend.
#[derive(Debug)]
pub struct FixtureBackend {
    state: Mutex<State>,
    behaviour: Behaviour,
    capabilities: BackendCapabilities,
    counters: Counters,
}

impl FixtureBackend {
    /// A `ready` backend holding `files`, updated just now, at revision `rev-0`.
    pub fn ready<P: Into<String>, C: Into<String>>(
        files: impl IntoIterator<Item = (P, C)>,
    ) -> FixtureBackend {
        FixtureBackend {
            state: Mutex::new(State {
                files: files
                    .into_iter()
                    .map(|(p, c)| (p.into(), c.into()))
                    .collect(),
                status: IndexStatus {
                    state: IndexState::Ready,
                    source_revision: Some("rev-0".into()),
                    updated_at: Some(UnixMillis::now()),
                },
                updates: Vec::new(),
                removals: Vec::new(),
            }),
            behaviour: Behaviour::Honest,
            // Its hits are always the first of path order, so the facade may page them.
            capabilities: BackendCapabilities {
                paging: true,
                ..BackendCapabilities::default()
            },
            counters: Counters::default(),
        }
    }

    /// Sets the behaviour.
    pub fn with_behaviour(mut self, behaviour: Behaviour) -> FixtureBackend {
        self.behaviour = behaviour;
        self
    }

    /// Declares (or not) the semantic capability.
    pub fn with_semantic(mut self, semantic: bool) -> FixtureBackend {
        self.capabilities.semantic = semantic;
        self
    }

    /// Declares exactly `capabilities`. The fixture matches fixed strings only and ignores the
    /// grep options, so declaring more is only for tests of what the seam does with a
    /// declaration (the schema, the refusals), never of the answers.
    pub fn with_capabilities(mut self, capabilities: BackendCapabilities) -> FixtureBackend {
        self.capabilities = capabilities;
        self
    }

    /// Call counts so far.
    pub fn calls(&self) -> Calls {
        let c = &self.counters;
        Calls {
            update: c.update.load(Ordering::SeqCst),
            remove: c.remove.load(Ordering::SeqCst),
            search: c.search.load(Ordering::SeqCst),
            status: c.status.load(Ordering::SeqCst),
            dispose: c.dispose.load(Ordering::SeqCst),
        }
    }

    /// The update requests received, as the backend saw them (after the facade's routing).
    pub fn updates(&self) -> Vec<UpdateRequest> {
        self.lock().updates.clone()
    }

    /// The remove requests received.
    pub fn removals(&self) -> Vec<RemoveRequest> {
        self.lock().removals.clone()
    }

    /// The paths currently held.
    pub fn paths(&self) -> Vec<String> {
        self.lock().files.keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn current_status(&self) -> IndexStatus {
        match &self.behaviour {
            Behaviour::Status(s) => s.clone(),
            _ => self.lock().status.clone(),
        }
    }

    fn honest_search(&self, request: &SearchRequest) -> BackendSearchResponse {
        let state = self.lock();
        let needle = if request.case_insensitive {
            request.query.to_lowercase()
        } else {
            request.query.clone()
        };
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        let cap = request.max_results.unwrap_or(usize::MAX);
        let mut hits = Vec::new();
        let mut complete = true;
        for (path, content) in &state.files {
            if let Some(scope) = &request.path
                && !(path == scope || path.starts_with(&format!("{scope}/")))
            {
                continue;
            }
            for (i, line) in content.lines().enumerate() {
                let hay = if request.case_insensitive {
                    std::borrow::Cow::Owned(line.to_lowercase())
                } else {
                    std::borrow::Cow::Borrowed(line)
                };
                if let Some(col) = finder.find(hay.as_bytes()) {
                    if hits.len() == cap {
                        complete = false;
                        break;
                    }
                    hits.push(BackendHit::new(
                        path.clone(),
                        i as u64 + 1,
                        col as u64 + 1,
                        line,
                        1.0 / (1.0 + hits.len() as f64),
                    ));
                    // One hit per file: the seam keeps the first hit of each path anyway.
                    break;
                }
            }
        }
        BackendSearchResponse {
            skipped: None,
            status: state.status.clone(),
            hits,
            complete,
            full_scan: false,
        }
    }
}

impl RepositoryIndexBackend for FixtureBackend {
    fn capabilities(&self) -> BackendCapabilities {
        self.capabilities
    }

    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        self.counters.update.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let mut state = self.lock();
            for change in &request.changes {
                match change {
                    Change::Add { path } | Change::Edit { path } => {
                        state
                            .files
                            .insert(path.clone(), format!("content of {path}\n"));
                    }
                    // The facade routes these to `remove`; a backend seeing one is a seam bug.
                    Change::Rename { .. } | Change::Delete { .. } => {
                        return Err("rename or delete reached the backend's update".into());
                    }
                }
            }
            state.status = IndexStatus {
                state: IndexState::Ready,
                source_revision: Some(request.source_revision.clone()),
                updated_at: Some(UnixMillis::now()),
            };
            state.updates.push(request);
            Ok(())
        })
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        self.counters.remove.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let mut state = self.lock();
            for p in &request.paths {
                state.files.remove(p);
            }
            if request.update_follows {
                // The first half of an update matches no revision until the update commits.
                state.status.state = IndexState::Building;
            }
            state.removals.push(request);
            Ok(())
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        self.counters.search.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            match &self.behaviour {
                Behaviour::Honest | Behaviour::PanicInStatus => Ok(self.honest_search(&request)),
                Behaviour::Status(s) => Ok(BackendSearchResponse {
                    skipped: None,
                    status: s.clone(),
                    ..self.honest_search(&request)
                }),
                Behaviour::ResponseStatus(s) => Ok(BackendSearchResponse {
                    skipped: None,
                    status: s.clone(),
                    ..self.honest_search(&request)
                }),
                Behaviour::Hits(hits) => Ok(BackendSearchResponse {
                    skipped: None,
                    status: self.current_status(),
                    hits: hits.clone(),
                    complete: true,
                    full_scan: false,
                }),
                Behaviour::Error(text) => Err(text.clone().into()),
                Behaviour::Panic => panic!("fixture backend panicked on purpose"),
                Behaviour::Slow(d) => {
                    std::thread::sleep(*d);
                    Ok(self.honest_search(&request))
                }
                Behaviour::Never => std::future::pending().await,
            }
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        self.counters.status.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if self.behaviour == Behaviour::PanicInStatus {
                panic!("fixture status panicked on purpose");
            }
            if let Behaviour::Error(text) = &self.behaviour {
                return Err(text.clone().into());
            }
            Ok(self.current_status())
        })
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        self.counters.dispose.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
}

/// A [`RepositoryOperations`](index_contract::RepositoryOperations) wrapper that counts searches,
/// to prove that an index query never silently falls back to a literal scan.
pub struct CountingOperations<O> {
    inner: O,
    searches: AtomicUsize,
}

impl<O> CountingOperations<O> {
    /// Wraps `inner`.
    pub fn new(inner: O) -> CountingOperations<O> {
        CountingOperations {
            inner,
            searches: AtomicUsize::new(0),
        }
    }

    /// Searches so far.
    pub fn searches(&self) -> usize {
        self.searches.load(Ordering::SeqCst)
    }
}

impl<O: index_contract::RepositoryOperations> index_contract::RepositoryOperations
    for CountingOperations<O>
{
    fn modes(&self) -> Vec<index_contract::SearchMode> {
        self.inner.modes()
    }

    fn limits(&self) -> index_contract::limits::SearchLimits {
        self.inner.limits()
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<index_contract::SearchResult, index_contract::IndexError>> {
        self.searches.fetch_add(1, Ordering::SeqCst);
        self.inner.search(request)
    }
}
