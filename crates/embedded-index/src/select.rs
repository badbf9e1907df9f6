//! Which files are indexed: exactly the literal fallback's selection, which is ripgrep's default.

use std::path::Path;

use std::collections::HashSet;
use std::sync::Mutex;

use ignore::WalkBuilder;

/// The repo-relative, `/`-separated UTF-8 paths of every file the literal search would search,
/// sorted the way it orders results (component by component). Files with non-UTF-8 names are
/// left out, as the literal search leaves them out.
pub(crate) fn files(root: &Path, threads: usize) -> Vec<String> {
    walk(root, threads, None)
}

/// Which of `candidates` (repo-relative paths) the literal search would search now. The walk is
/// pruned to the candidates' ancestor directories, so it costs about as many directory reads as
/// the candidates have ancestors, with the same ignore rules as a full walk.
pub(crate) fn select(root: &Path, threads: usize, candidates: &[String]) -> Vec<String> {
    if candidates.is_empty() {
        return Vec::new();
    }
    let mut dirs: HashSet<String> = HashSet::new();
    for c in candidates {
        let mut at = c.as_str();
        while let Some(i) = at.rfind('/') {
            at = &at[..i];
            if !dirs.insert(at.to_owned()) {
                break;
            }
        }
    }
    let files: HashSet<String> = candidates.iter().cloned().collect();
    walk(root, threads, Some((dirs, files)))
}

fn walk(
    root: &Path,
    threads: usize,
    only: Option<(HashSet<String>, HashSet<String>)>,
) -> Vec<String> {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(true)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .require_git(true)
        .follow_links(false)
        .threads(threads);
    builder.add_custom_ignore_filename(".rgignore");
    if let Some((dirs, files)) = only {
        let root = root.to_path_buf();
        builder.filter_entry(move |entry| {
            let Some(rel) = entry
                .path()
                .strip_prefix(&root)
                .ok()
                .and_then(|p| p.to_str())
            else {
                return false;
            };
            if rel.is_empty() {
                return true;
            }
            let rel = rel.replace(std::path::MAIN_SEPARATOR, "/");
            if entry.file_type().is_some_and(|t| t.is_dir()) {
                dirs.contains(&rel)
            } else {
                files.contains(&rel)
            }
        });
    }
    let found = Mutex::new(Vec::new());
    builder.build_parallel().run(|| {
        let mut local = Flush {
            local: Vec::new(),
            found: &found,
        };
        Box::new(move |entry| {
            if let Ok(entry) = entry
                && entry.file_type().is_some_and(|t| t.is_file())
                && let Some(rel) = entry
                    .path()
                    .strip_prefix(root)
                    .ok()
                    .and_then(|p| p.to_str())
            {
                local
                    .local
                    .push(rel.replace(std::path::MAIN_SEPARATOR, "/"));
            }
            ignore::WalkState::Continue
        })
    });
    let mut v = found.into_inner().unwrap_or_else(|p| p.into_inner());
    v.sort_by(|a, b| a.split('/').cmp(b.split('/')));
    v
}

/// A walker thread's finds, handed over once when the thread's visitor is dropped.
struct Flush<'a> {
    local: Vec<String>,
    found: &'a Mutex<Vec<String>>,
}

impl Drop for Flush<'_> {
    fn drop(&mut self) {
        self.found
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .append(&mut self.local);
    }
}
