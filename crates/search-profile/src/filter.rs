//! ripgrep's `-g` and `-t` on repo-relative paths: built once, used by the walk
//! ([`crate::Selection::filter`]) and by backends that filter paths they already hold
//! ([`PathFilter`]).

use std::path::Path;
use std::sync::{Arc, Mutex};

use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};
use index_contract::{FileFilter, IndexError};

/// ripgrep's built-in type name for "any file of a defined type" (`rg -t all`).
const ALL_TYPES: &str = "all";

/// The compiled globs and types of a [`FileFilter`], with ripgrep's precedence.
///
/// ripgrep (the `ignore` crate's walk) decides a path in this order:
///
/// 1. **Globs** (`-g`, an override): a path matching a glob is included (or, for a `!glob`,
///    excluded) whatever else applies: ignore rules, hidden-ness, and types. The last matching
///    glob wins. When there is at least one include glob, a *file* matching none is excluded; a
///    directory matching none is still entered.
/// 2. Ignore rules and hidden-ness (not this type's business: see [`crate::Selection`]).
/// 3. **Types** (`-t`): a file must be of one of the types; directories are not typed.
///
/// A directory excluded by a glob is not entered, so nothing beneath it is searched.
///
/// # Example
///
/// ```
/// use index_contract::FileFilter;
/// use search_profile::PathFilter;
///
/// let filter = PathFilter::new(&FileFilter {
///     globs: vec!["!vendor/**".into()],
///     types: vec!["rust".into()],
///     ..FileFilter::default()
/// })?;
/// assert!(filter.matches("src/main.rs"));
/// assert!(!filter.matches("src/notes.md"));
/// assert!(!filter.matches("vendor/lib.rs"));
/// # Ok::<(), index_contract::IndexError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PathFilter {
    globs: Override,
    types: Arc<Types>,
}

/// How many type selections [`compiled_types`] keeps compiled.
const TYPES_KEPT: usize = 8;

/// The last type selections compiled, most recent first.
static TYPES: Mutex<Vec<(Vec<String>, Arc<Types>)>> = Mutex::new(Vec::new());

/// `names` compiled as ripgrep compiles `-t`, with its default definitions: from the last few
/// compiled when they include `names`. Compiling the definitions (several hundred globs) costs
/// more than a rare indexed query, and a person or an agent asks for the same few types again
/// and again.
fn compiled_types(names: &[String]) -> Result<Arc<Types>, IndexError> {
    let mut kept = TYPES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(at) = kept.iter().position(|(n, _)| n.as_slice() == names) {
        let hit = kept.remove(at);
        let types = hit.1.clone();
        kept.insert(0, hit);
        return Ok(types);
    }
    drop(kept);
    let mut types = TypesBuilder::new();
    types.add_defaults();
    for (index, name) in names.iter().enumerate() {
        // `select` accepts any name; an unknown one fails at `build`, without its position.
        // `all` is ripgrep's own: every defined type.
        if name != ALL_TYPES && !types.definitions().iter().any(|d| d.name() == name) {
            return Err(IndexError::UnknownFileType { index });
        }
        types.select(name);
    }
    let types = Arc::new(
        types
            .build()
            .map_err(|_| IndexError::UnknownFileType { index: 0 })?,
    );
    let mut kept = TYPES.lock().unwrap_or_else(|p| p.into_inner());
    kept.retain(|(n, _)| n.as_slice() != names);
    kept.insert(0, (names.to_vec(), types.clone()));
    kept.truncate(TYPES_KEPT);
    Ok(types)
}

impl PathFilter {
    /// Compiles `files`' globs and types as ripgrep compiles `-g` and `-t` (its default type
    /// definitions). A bad glob or an unknown type is refused as [`crate::check_file_filter`]
    /// refuses it. `include_hidden` and `include_ignored` are the walk's business and are not
    /// looked at here.
    pub fn new(files: &FileFilter) -> Result<PathFilter, IndexError> {
        // Globs are matched against repo-relative paths: a root of `.` strips nothing.
        PathFilter::at(files, Path::new("."))
    }

    /// The filter for paths under `root`: the walk matches absolute paths, which the globs see
    /// relative to `root`, as ripgrep's see them relative to its working directory.
    pub(crate) fn at(files: &FileFilter, root: &Path) -> Result<PathFilter, IndexError> {
        let mut globs = OverrideBuilder::new(root);
        for (index, glob) in files.globs.iter().enumerate() {
            globs
                .add(glob)
                .map_err(|_| IndexError::InvalidGlob { index })?;
        }
        let globs = globs
            .build()
            .map_err(|_| IndexError::InvalidGlob { index: 0 })?;
        // ripgrep's default definitions compile into a glob set of several hundred globs: built
        // only when a type is asked for, since without one no path is matched by type.
        if files.types.is_empty() {
            return Ok(PathFilter {
                globs,
                types: Arc::new(Types::empty()),
            });
        }
        let types = compiled_types(&files.types)?;
        Ok(PathFilter { globs, types })
    }

    /// Whether ripgrep, given these globs and types, would search the file at the repo-relative,
    /// `/`-separated `rel_path`, assuming the default walk would (it is not ignored, not hidden):
    /// no ancestor directory is excluded by a glob, and the file itself is included by a glob, or
    /// matches no glob (with no include glob) and is of a selected type (when there are types).
    pub fn matches(&self, rel_path: &str) -> bool {
        // A walk name is matched as the name it stands for, as the walk matches it.
        let path = crate::name::os_path(rel_path);
        let path = &*path;
        // Only an excluding glob can exclude a directory.
        if self.globs.num_ignores() > 0
            && path
                .ancestors()
                .skip(1)
                .filter(|dir| !dir.as_os_str().is_empty())
                .any(|dir| self.globs.matched(dir, true).is_ignore())
        {
            return false;
        }
        let by_glob = self.globs.matched(path, false);
        if by_glob.is_whitelist() {
            return true;
        }
        if by_glob.is_ignore() {
            return false;
        }
        !self.types.matched(path, false).is_ignore()
    }

    /// Whether an include glob matches the directory at `rel_path`: ripgrep then enters it
    /// though ignore or hidden rules would skip it (and searches the files in it that a glob
    /// includes).
    pub fn includes_directory(&self, rel_path: &str) -> bool {
        self.globs
            .matched(&*crate::name::os_path(rel_path), true)
            .is_whitelist()
    }

    pub(crate) fn overrides(&self) -> &Override {
        &self.globs
    }

    pub(crate) fn types(&self) -> &Types {
        &self.types
    }
}

#[cfg(test)]
mod tests {
    use index_contract::FileFilter;

    use super::PathFilter;

    #[test]
    fn compiled_types_are_reused_and_keep_each_selection_apart() {
        let filter = |types: &[&str]| {
            PathFilter::new(&FileFilter {
                types: types.iter().map(|t| t.to_string()).collect(),
                ..FileFilter::default()
            })
        };
        let c = filter(&["c"]).unwrap();
        let rust = filter(&["rust"]).unwrap();
        let again = filter(&["c"]).unwrap();
        assert!(c.matches("a.c") && !c.matches("a.rs"));
        assert!(rust.matches("a.rs") && !rust.matches("a.c"));
        assert!(std::sync::Arc::ptr_eq(&c.types, &again.types));
        // An unknown type is refused with its position, compiled before or not.
        for _ in 0..2 {
            assert_eq!(
                filter(&["c", "no-such-type"]).unwrap_err(),
                index_contract::IndexError::UnknownFileType { index: 1 }
            );
        }
    }
    fn check(globs: &[&str], types: &[&str], path: &str, expected: bool) {
        let filter = PathFilter::new(&FileFilter {
            globs: globs.iter().map(|g| g.to_string()).collect(),
            types: types.iter().map(|t| t.to_string()).collect(),
            ..FileFilter::default()
        })
        .unwrap();
        assert_eq!(
            filter.matches(path),
            expected,
            "globs {globs:?} types {types:?} path {path}"
        );
    }

    #[test]
    fn globs_and_types_follow_ripgreps_precedence() {
        check(&[], &[], "a/b.txt", true);
        check(&["*.rs"], &[], "src/a.rs", true);
        check(&["*.rs"], &[], "src/a.txt", false);
        check(&["!*.rs"], &[], "src/a.rs", false);
        check(&["!*.rs"], &[], "src/a.txt", true);
        // The last matching glob wins.
        check(&["*.rs", "!src/*.rs"], &[], "src/a.rs", false);
        check(&["!src/*.rs", "*.rs"], &[], "src/a.rs", true);
        // A glob with a slash is anchored at the root; one without matches at any depth.
        check(&["src/*.rs"], &[], "lib/src/a.rs", false);
        check(&["a.rs"], &[], "lib/src/a.rs", true);
        // An excluded directory is not entered.
        check(&["!vendor"], &[], "vendor/x/a.rs", false);
        check(&["!vendor/"], &[], "sub/vendor/a.rs", false);
        // Types apply to files no glob decided; an include glob decides every file.
        check(&[], &["rust"], "a.rs", true);
        check(&[], &["rust"], "a.py", false);
        check(&[], &["rust", "py"], "a.py", true);
        check(&["!a.rs"], &["rust"], "b.rs", true);
        check(&["!a.rs"], &["rust"], "b.py", false);
        check(&["*.py"], &["rust"], "b.py", true);
        check(&["*.py"], &["rust"], "b.rs", false);
    }

    #[test]
    fn type_all_selects_every_file_of_a_defined_type_as_rg_t_all() {
        check(&[], &["all"], "a.rs", true);
        check(&[], &["all"], "docs/b.md", true);
        check(&[], &["all"], "Makefile", true);
        check(&[], &["all"], "notes.unknownext", false);
        check(&[], &["all", "rust"], "a.rs", true);
    }

    #[test]
    fn a_bad_glob_or_an_unknown_type_is_refused_by_position() {
        let bad = |globs: Vec<String>, types: Vec<String>| {
            PathFilter::new(&FileFilter {
                globs,
                types,
                ..FileFilter::default()
            })
            .unwrap_err()
            .to_string()
        };
        let e = bad(vec!["*.rs".into(), "a[".into()], vec![]);
        assert!(e.contains("entry 1"), "{e}");
        let e = bad(vec![], vec!["rust".into(), "nosuch".into()]);
        assert!(e.contains("entry 1"), "{e}");
    }
}
