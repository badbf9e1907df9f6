//! The host: it owns the embedded index's lifecycle and keeps it fresh before every query.

use std::collections::{BTreeSet, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use embedded_index::EmbeddedIndex;
use index_contract::{
    Change, IndexError, IndexState, SearchMode, UpdateRequest,
    limits::{DEFAULT_MAX_CHANGES, DEFAULT_UPDATE_BYTES},
};
use literal_search::LiteralSearch;
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations, RepoSearchTool};
use serde::{Deserialize, Serialize};

use crate::git;

/// What the host remembers between runs, next to the index: the revision it committed and the
/// HEAD and dirty files that revision stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct HostState {
    revision: String,
    head: Option<String>,
    dirty: Vec<DirtyFile>,
    /// Stamps of the ignore files outside the worktree (`info/exclude`, the global excludes file):
    /// when one changes, the whole selection is compared again.
    ignore_rules: Vec<Option<(u64, u128)>>,
}

/// A file that differed from HEAD, with the size and mtime it had when it was indexed. `stamp` is
/// `None` for a missing file, and for one modified within the last two seconds, whose mtime
/// cannot prove that it will not change again within the same tick ("racy clean" in git's words),
/// so it is indexed again next time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct DirtyFile {
    path: String,
    stamp: Option<(u64, u128)>,
}

fn git_snapshot(root: &Path) -> Result<GitSnapshot, String> {
    let head = git::head(root);
    let now = std::time::SystemTime::now();
    let dirty = git::dirty(root)?
        .into_iter()
        .map(|path| DirtyFile {
            stamp: stamp(root, &path, now),
            path,
        })
        .collect();
    Ok((head, dirty))
}

fn stamp(root: &Path, path: &str, now: std::time::SystemTime) -> Option<(u64, u128)> {
    stamp_path(&root.join(path), now)
}

fn stamp_path(path: &Path, now: std::time::SystemTime) -> Option<(u64, u128)> {
    let m = std::fs::metadata(path).ok()?;
    let modified = m.modified().ok()?;
    if now
        .duration_since(modified)
        .map_or(true, |age| age < std::time::Duration::from_secs(2))
    {
        return None;
    }
    let ns = modified
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    Some((m.len(), ns))
}

const STATE_FILE: &str = "host-state.json";

/// What a refresh did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Refresh {
    pub(crate) kind: &'static str,
    pub(crate) upserts: usize,
    pub(crate) removals: usize,
    pub(crate) revision: String,
}

/// The git facts a refresh starts from.
type GitSnapshot = (Option<String>, Vec<DirtyFile>);

/// How a host is opened.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HostOptions {
    /// Start reading git's view of the worktree (`git status`, the slowest step of a refresh) on
    /// a thread while the index opens. For a command that queries at once; a long-lived server
    /// must not, since its first query may come much later.
    pub(crate) prefetch_git: bool,
}

pub(crate) struct Host {
    pub(crate) root: PathBuf,
    git_dir: PathBuf,
    prefetched: std::sync::Mutex<Option<std::thread::JoinHandle<Result<GitSnapshot, String>>>>,
    pub(crate) index_dir: PathBuf,
    pub(crate) index: Arc<EmbeddedIndex>,
    pub(crate) ops: Arc<IndexedRepositoryOperations>,
    pub(crate) tool: RepoSearchTool,
}

impl Host {
    /// Opens the host for the worktree containing `dir`, with the index in `index_dir` or, by
    /// default, in this worktree's git directory (`<git-dir>/repo-search`).
    pub(crate) fn open(
        dir: &Path,
        index_dir: Option<&Path>,
        options: HostOptions,
    ) -> Result<Host, String> {
        let dir = dir
            .canonicalize()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let root = git::toplevel(&dir).map_err(|e| format!("not a git worktree ({e})"))?;
        let root = root.canonicalize().map_err(|e| e.to_string())?;
        let git_dir = git::git_dir(&root)?;
        let prefetched = options.prefetch_git.then(|| {
            let root = root.clone();
            std::thread::spawn(move || git_snapshot(&root))
        });
        let index_dir = match index_dir {
            Some(d) => {
                std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
                let d = d.canonicalize().map_err(|e| e.to_string())?;
                // The index must never be searchable itself.
                if d.starts_with(&root) && !d.starts_with(&git_dir) {
                    return Err(format!(
                        "--index-dir {} is inside the worktree; put it outside, or leave it out to use the git directory",
                        d.display()
                    ));
                }
                d
            }
            None => git_dir.join("repo-search"),
        };
        let index = Arc::new(
            EmbeddedIndex::open(&root, &index_dir)
                .map_err(|e| format!("{}: {e}", index_dir.display()))?,
        );
        let fallback = Arc::new(LiteralSearch::new(&root).map_err(|e| e.to_string())?);
        let ops = Arc::new(
            IndexedRepositoryOperations::new(
                &root,
                index.clone(),
                fallback,
                IndexedOperationsConfig::default(),
            )
            .map_err(|e| e.to_string())?,
        );
        let tool = RepoSearchTool::new(
            ops.clone(),
            &[SearchMode::Literal, SearchMode::IndexedLiteral],
        )
        .map_err(|e| e.to_string())?;
        Ok(Host {
            root,
            git_dir,
            prefetched: std::sync::Mutex::new(prefetched),
            index_dir,
            index,
            ops,
            tool,
        })
    }

    fn read_state(&self) -> Option<HostState> {
        let bytes = std::fs::read(self.index_dir.join(STATE_FILE)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn write_state(&self, state: &HostState) -> Result<(), String> {
        let bytes = serde_json::to_vec(state).map_err(|e| e.to_string())?;
        let tmp = self.index_dir.join(format!(".{STATE_FILE}.tmp"));
        std::fs::write(&tmp, bytes).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, self.index_dir.join(STATE_FILE)).map_err(|e| e.to_string())
    }

    /// HEAD and the dirty files: the prefetched snapshot when there is one, else read now.
    fn git_snapshot(&self) -> Result<GitSnapshot, String> {
        let pending = self
            .prefetched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match pending {
            Some(handle) => handle
                .join()
                .map_err(|_| "reading git state failed".to_owned())?,
            None => git_snapshot(&self.root),
        }
    }

    /// Stamps of the ignore files outside the worktree that decide the selection.
    fn ignore_rule_stamps(&self) -> Vec<Option<(u64, u128)>> {
        let now = std::time::SystemTime::now();
        let mut files = vec![self.git_dir.join("info").join("exclude")];
        if let Some(global) = git::global_excludes_file(&self.root) {
            files.push(global);
        }
        files.iter().map(|f| stamp_path(f, now)).collect()
    }

    /// The revision id for HEAD plus the dirty state: `<head>` when clean, else
    /// `<head>+dirty.<crc32 of the dirty paths with their stamps>`. Bounded, printable, and
    /// different whenever a dirty file changes.
    fn revision(head: Option<&str>, dirty: &[DirtyFile]) -> String {
        let base = head.unwrap_or("unborn");
        if dirty.is_empty() {
            return base.to_owned();
        }
        let mut h = crc32fast::Hasher::new();
        for d in dirty {
            h.update(d.path.as_bytes());
            match d.stamp {
                Some((len, ns)) => {
                    h.update(&len.to_le_bytes());
                    h.update(&ns.to_le_bytes());
                }
                // An unstamped file makes the revision unique to this refresh.
                None => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos());
                    h.update(&now.to_le_bytes());
                }
            }
        }
        format!("{base}+dirty.{:08x}", h.finalize())
    }

    /// Builds the whole index now.
    pub(crate) fn rebuild(&self) -> Result<Refresh, String> {
        let (head, dirty) = self.git_snapshot()?;
        let revision = Self::revision(head.as_deref(), &dirty);
        self.full_build(&revision)?;
        let ignore_rules = self.ignore_rule_stamps();
        self.write_state(&HostState {
            revision: revision.clone(),
            head,
            dirty,
            ignore_rules,
        })?;
        Ok(Refresh {
            kind: "build",
            upserts: self.index.indexed_paths().len(),
            removals: 0,
            revision,
        })
    }

    fn full_build(&self, revision: &str) -> Result<(), String> {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "indexing {bar:40} {pos}/{len} files ({elapsed})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        let mut progress = |done: usize, total: usize| {
            if let Some(b) = &bar {
                b.set_length(total as u64);
                b.set_position(done as u64);
            }
        };
        self.index
            .build_with_progress(revision, &mut progress)
            .map_err(|e| e.to_string())?;
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        Ok(())
    }

    /// Brings the index up to date with the worktree: a full build on first use (or when the
    /// index and the host's record disagree), else an incremental update from git: the files
    /// changed between the indexed HEAD and this one, every file dirty then or now, and any
    /// difference between the indexed set and the current selection (which catches changes to
    /// ignore rules). Changes go through the facade's `update` in batches within its caps. When
    /// nothing changed, the commit time is still renewed.
    pub(crate) async fn refresh(&self) -> Result<Refresh, String> {
        let (head, dirty) = self.git_snapshot()?;
        let revision = Self::revision(head.as_deref(), &dirty);
        let status = self.index.current_status();
        let state = self.read_state();
        let Some(old) = state.filter(|s| {
            status.state == IndexState::Ready
                && status.source_revision.as_deref() == Some(s.revision.as_str())
        }) else {
            return self.rebuild();
        };
        // Dirty files are indexed again when their stamp changed or is unknown, and when they
        // stopped being dirty (committed or reverted: their content may differ from what was
        // indexed). A repository with many untracked files does not re-index them all each time.
        let before: std::collections::HashMap<&str, Option<(u64, u128)>> = old
            .dirty
            .iter()
            .map(|d| (d.path.as_str(), d.stamp))
            .collect();
        let now: HashSet<&str> = dirty.iter().map(|d| d.path.as_str()).collect();
        let mut candidates: BTreeSet<String> = dirty
            .iter()
            .filter(|d| d.stamp.is_none() || before.get(d.path.as_str()) != Some(&d.stamp))
            .map(|d| d.path.clone())
            .collect();
        candidates.extend(
            old.dirty
                .iter()
                .filter(|d| !now.contains(d.path.as_str()))
                .map(|d| d.path.clone()),
        );
        if old.head != head {
            match (&old.head, &head) {
                (Some(a), Some(b)) => match git::changed_between(&self.root, a, b) {
                    Ok(paths) => candidates.extend(paths),
                    Err(_) => return self.rebuild(),
                },
                _ => return self.rebuild(),
            }
        }
        let mut changes: Vec<Change> = Vec::new();
        let ignore_rules = self.ignore_rule_stamps();
        let rules_changed = old.ignore_rules != ignore_rules
            || candidates.iter().any(|p| {
                let name = p.rsplit('/').next().unwrap_or(p);
                matches!(name, ".gitignore" | ".ignore" | ".rgignore")
            });
        if rules_changed {
            // Ignore rules changed: which files are searched may have changed anywhere, so the
            // whole selection is compared with the index.
            let selection: HashSet<String> = self.index.selection().into_iter().collect();
            let indexed: HashSet<String> = self.index.indexed_paths().into_iter().collect();
            for p in indexed.difference(&selection) {
                changes.push(Change::Delete { path: p.clone() });
            }
            let mut upserts: BTreeSet<&String> = selection.difference(&indexed).collect();
            upserts.extend(candidates.iter().filter(|p| selection.contains(*p)));
            for p in upserts {
                changes.push(if indexed.contains(p) {
                    Change::Edit { path: p.clone() }
                } else {
                    Change::Add { path: p.clone() }
                });
            }
        } else {
            // Otherwise only the candidates can have changed: check just them against the
            // selection rules (hidden, ignored, binary-agnostic) and the index.
            let candidates: Vec<String> = candidates.into_iter().collect();
            let selected: HashSet<String> = self.index.select(&candidates).into_iter().collect();
            for p in candidates {
                let indexed = self.index.contains(&p);
                if selected.contains(&p) {
                    changes.push(if indexed {
                        Change::Edit { path: p }
                    } else {
                        Change::Add { path: p }
                    });
                } else if indexed {
                    changes.push(Change::Delete { path: p });
                }
            }
        }
        let removals = changes
            .iter()
            .filter(|c| matches!(c, Change::Delete { .. }))
            .count();
        let report = Refresh {
            kind: if changes.is_empty() {
                "touch"
            } else {
                "update"
            },
            upserts: changes.len() - removals,
            removals,
            revision: revision.clone(),
        };
        self.send(changes, &revision)
            .await
            .map_err(|e| format!("{}: {e}", e.code()))?;
        self.write_state(&HostState {
            revision,
            head,
            dirty,
            ignore_rules,
        })?;
        Ok(report)
    }

    /// Sends changes through the facade in batches within the caps. Every batch but the last
    /// commits a provisional revision (`<revision>~partial.<n>`), so an interrupted refresh never
    /// leaves the index attesting a revision it does not hold.
    async fn send(&self, changes: Vec<Change>, revision: &str) -> Result<(), IndexError> {
        let mut batches: Vec<Vec<Change>> = vec![Vec::new()];
        let mut bytes = 0usize;
        let budget = DEFAULT_UPDATE_BYTES - 4096;
        for c in changes {
            let size = c.path().len();
            let last = batches.last().map_or(0, Vec::len);
            if last == DEFAULT_MAX_CHANGES || bytes + size > budget {
                batches.push(Vec::new());
                bytes = 0;
            }
            bytes += size;
            if let Some(b) = batches.last_mut() {
                b.push(c);
            }
        }
        let n = batches.len();
        for (i, batch) in batches.into_iter().enumerate() {
            let source_revision = if i + 1 == n {
                revision.to_owned()
            } else {
                format!("{revision}~partial.{i}")
            };
            self.ops
                .index()
                .update(UpdateRequest {
                    // Ids name the worktree without carrying its path (which could hold anything).
                    repository_id: format!(
                        "repo-{:08x}",
                        crc32fast::hash(self.root.as_os_str().as_encoded_bytes())
                    ),
                    worktree_id: format!(
                        "worktree-{:08x}",
                        crc32fast::hash(self.index_dir.as_os_str().as_encoded_bytes())
                    ),
                    source_revision,
                    changes: batch,
                })
                .await?;
        }
        Ok(())
    }
}
