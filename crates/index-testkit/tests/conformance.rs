//! The conformance suite has teeth: a small honest backend passes the checks below, and the same
//! backend with one fault fails the check that guards against that fault.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use index_contract::{
    BackendCapabilities, BackendError, BackendHit, BackendSearchResponse, BoxFuture, Change,
    IndexState, IndexStatus, RemoveRequest, RepositoryIndexBackend, SearchRequest, SkippedFiles,
    UnixMillis, UpdateRequest,
};
use index_testkit::conformance::{self, CHECKS, Subject};

/// One fault the backend can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// `remove` succeeds and drops nothing.
    IgnoresRemove,
    /// `status` and answers attest the first revision forever.
    KeepsFirstRevision,
    /// Files whose names the gate refuses are returned like any other.
    ServesRefusedNames,
    /// An answer that left a refused file's match out claims to be complete.
    HidesUnservedFiles,
    /// Files whose names are not UTF-8 are left out, as if they did not exist.
    DropsNonUtf8Names,
    /// The first half of an update (its removals) commits under the old revision's name.
    RemovalKeepsRevision,
}

/// An in-memory index of a worktree's plain-text files: a fixed-string, case-sensitive search
/// that returns each file's first matching line, in path order.
struct Memory {
    root: PathBuf,
    fault: Fault,
    state: Mutex<(BTreeMap<String, String>, IndexStatus)>,
}

impl Memory {
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read(search_profile::name_path(&self.root, path))
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    fn commit(status: &mut IndexStatus, revision: &str) {
        *status = IndexStatus {
            state: IndexState::Ready,
            source_revision: Some(revision.to_owned()),
            updated_at: Some(UnixMillis::now()),
        };
    }
}

impl RepositoryIndexBackend for Memory {
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::default()
    }

    fn update(&self, request: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            // An update takes a while, as a real one does, so that readers racing it meet the
            // state between its removal and its commit.
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut state = self.state.lock().unwrap();
            for change in &request.changes {
                let path = change.path().to_owned();
                match (change, self.read(&path)) {
                    (Change::Add { .. } | Change::Edit { .. }, Some(text)) => {
                        state.0.insert(path, text);
                    }
                    (Change::Add { .. } | Change::Edit { .. }, None) => {
                        state.0.remove(&path);
                    }
                    _ => return Err("the facade routes renames and deletes to remove".into()),
                }
            }
            if self.fault != Fault::KeepsFirstRevision {
                Memory::commit(&mut state.1, &request.source_revision);
            }
            Ok(())
        })
    }

    fn remove(&self, request: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let mut state = self.state.lock().unwrap();
            if self.fault != Fault::IgnoresRemove {
                for p in &request.paths {
                    state.0.remove(p);
                }
            }
            if request.update_follows && self.fault != Fault::RemovalKeepsRevision {
                // Matching no revision until the update commits.
                state.1 = IndexStatus::new(IndexState::Building);
            }
            Ok(())
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        Box::pin(async move {
            let state = self.state.lock().unwrap();
            let mut response = BackendSearchResponse {
                status: state.1.clone(),
                hits: Vec::new(),
                complete: true,
                skipped: None,
                full_scan: true,
            };
            let mut skipped = SkippedFiles::default();
            for (path, text) in &state.0 {
                if let Some(scope) = &request.path
                    && !index_guard::is_within(path, scope)
                {
                    continue;
                }
                let Some((i, line, column)) = text
                    .lines()
                    .enumerate()
                    .find_map(|(i, l)| l.find(&request.query).map(|c| (i, l, c)))
                else {
                    continue;
                };
                if index_guard::check_path(path).is_err() && self.fault != Fault::ServesRefusedNames
                {
                    search_profile::count_unserved(&mut skipped, path);
                    response.complete = self.fault == Fault::HidesUnservedFiles;
                    continue;
                }
                let hit = BackendHit::new(path, i as u64 + 1, column as u64 + 1, line, 0.5);
                response.hits.push(hit);
            }
            response.skipped = Some(skipped);
            Ok(response)
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        Box::pin(async move { Ok(self.state.lock().unwrap().1.clone()) })
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
}

struct Faulty(Fault);

impl Subject for Faulty {
    fn open<'a>(
        &'a self,
        root: &'a Path,
        revision: &'a str,
    ) -> BoxFuture<'a, Arc<dyn RepositoryIndexBackend>> {
        Box::pin(async move {
            let mut files = BTreeMap::new();
            let mut status = IndexStatus::new(IndexState::Empty);
            let index = Memory {
                root: root.to_path_buf(),
                fault: self.0,
                state: Mutex::new((BTreeMap::new(), IndexStatus::new(IndexState::Empty))),
            };
            for path in search_profile::Selection::new(root).files() {
                if self.0 == Fault::DropsNonUtf8Names && search_profile::is_non_utf8_name(&path) {
                    continue;
                }
                if let Some(text) = index.read(&path) {
                    files.insert(path, text);
                }
            }
            Memory::commit(&mut status, revision);
            *index.state.lock().unwrap() = (files, status);
            Arc::new(index) as Arc<dyn RepositoryIndexBackend>
        })
    }
}

/// Runs the check named `name` on a backend with `fault`: it passes without a fault, and fails
/// with one.
fn check(name: &str, fault: Fault) {
    let check = CHECKS
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name}"));
    let runtime = conformance::runtime();
    let run = |fault| runtime.block_on(runtime.spawn((check.run)(Arc::new(Faulty(fault)))));
    assert!(run(Fault::None).is_ok(), "{name} fails an honest backend");
    let failed = run(fault).expect_err("passed a faulty backend");
    assert!(failed.is_panic(), "{name}: {failed}");
}

#[test]
fn a_backend_that_ignores_removals_fails_the_rename_and_delete_check() {
    check(
        "renames_and_deletes_are_routed_as_removals_and_show_in_hits",
        Fault::IgnoresRemove,
    );
}

#[test]
fn a_backend_that_ignores_removals_fails_the_revision_check() {
    check(
        "status_and_answers_attest_the_last_committed_revision",
        Fault::IgnoresRemove,
    );
}

#[test]
fn a_backend_stuck_on_its_first_revision_fails_the_revision_check() {
    check(
        "status_and_answers_attest_the_last_committed_revision",
        Fault::KeepsFirstRevision,
    );
}

#[test]
fn a_backend_stuck_on_its_first_revision_fails_the_racing_check() {
    check(
        "queries_racing_updates_see_one_revision_never_a_mix",
        Fault::KeepsFirstRevision,
    );
}

#[test]
fn a_backend_serving_refused_names_fails_the_trust_check() {
    check(
        "a_file_whose_name_the_gate_refuses_is_never_served",
        Fault::ServesRefusedNames,
    );
}

#[test]
fn a_backend_hiding_unserved_files_fails_the_trust_check() {
    check(
        "a_file_whose_name_the_gate_refuses_is_never_served",
        Fault::HidesUnservedFiles,
    );
}

#[test]
fn a_backend_dropping_names_that_are_not_utf8_fails_the_names_check() {
    check(
        "a_matching_file_whose_name_is_not_utf8_is_counted_never_served",
        Fault::DropsNonUtf8Names,
    );
}

#[test]
fn a_backend_serving_an_update_half_way_under_the_old_revision_fails_the_racing_check() {
    check(
        "queries_racing_updates_see_one_revision_never_a_mix",
        Fault::RemovalKeepsRevision,
    );
}
