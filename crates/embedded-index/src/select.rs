//! Which files are indexed: exactly the literal fallback's selection, which is ripgrep's default.

use std::path::Path;

use std::sync::Mutex;

use ignore::WalkBuilder;

/// The repo-relative, `/`-separated UTF-8 paths of every file the literal search would search,
/// sorted the way it orders results (component by component). Files with non-UTF-8 names are
/// left out, as the literal search leaves them out.
pub(crate) fn files(root: &Path, threads: usize) -> Vec<String> {
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
