//! Variants: files that hold another version of code the repository also holds, which a question
//! that does not name the variant is rarely about.
//!
//! Two kinds are told from paths alone:
//! - **another platform's code**: a directory or a file-name word that names an operating system
//!   other than the one this process runs on (on Linux: `src/win/fs.c` beside `src/unix/fs.c`,
//!   `exec_windows.go`, `os390.c`);
//! - **a superseded version**: a directory `vN` beside a sibling `vM` with `M > N` (`src/v3/`
//!   beside `src/v4/`).
//!
//! A question that names the variant (`windows`, `win32`, `v3`) asks about it: that variant is
//! not one for it. Each variant's path prior is multiplied by [`VARIANT_PRIOR`]. The rule ranks
//! a variant after its main line; it hides nothing.
//!
//! This module only reads paths; the store decides which files it asks about (the head of a
//! ranking, `Store::lower_by_path`) and keeps the list of version directories.

use std::collections::{BTreeMap, HashSet};

/// What a variant's path prior is multiplied by. Chosen on semble's questions
/// (docs/semantic-design.md, "Variants"): the mean NDCG@10 was 0.838 at 1 (no rule), 0.860 at
/// 0.8, 0.865 at 0.7 and 0.866 at 0.6.
pub const VARIANT_PRIOR: f32 = 0.7;

/// The operating systems a path may name, each with the words that name it. A word is a whole
/// directory name, or a file stem's part between `-`, `_` and `.` (`fs-win.c`, `exec_linux.go`).
const PLATFORMS: &[(&str, &[&str])] = &[
    ("linux", &["linux"]),
    (
        "windows",
        &[
            "win", "win32", "win64", "windows", "mingw", "cygwin", "msvc",
        ],
    ),
    ("macos", &["darwin", "macos", "osx"]),
    ("ios", &["ios"]),
    ("android", &["android"]),
    ("freebsd", &["freebsd"]),
    ("openbsd", &["openbsd"]),
    ("netbsd", &["netbsd"]),
    ("dragonfly", &["dragonfly", "dragonflybsd"]),
    ("solaris", &["solaris", "sunos", "illumos"]),
    ("aix", &["aix"]),
    ("zos", &["os390", "zos", "mvs"]),
    ("ibmi", &["ibmi", "os400"]),
    ("haiku", &["haiku"]),
    ("qnx", &["qnx"]),
    ("hurd", &["hurd"]),
    ("fuchsia", &["fuchsia"]),
];

/// Words that name a family of systems: the host's own code when it belongs to it, another
/// platform's otherwise.
const FAMILIES: &[(&str, &[&str])] = &[("unix", &["unix", "posix"]), ("bsd", &["bsd"])];

/// Which families `host` (as [`std::env::consts::OS`] names it) belongs to.
fn host_families(host: &str) -> &'static [&'static str] {
    match host {
        "windows" => &[],
        "macos" | "ios" | "freebsd" | "openbsd" | "netbsd" | "dragonfly" => &["unix", "bsd"],
        _ => &["unix"],
    }
}

/// The longest word of [`PLATFORMS`] and [`FAMILIES`].
const LONGEST_WORD: usize = 12;

/// The newest version among a store's files under each directory that holds `vN`
/// directories: the parent's path (with a trailing `/`, or empty at the root) and the largest
/// `N`. A store finds them once, and only when a question's candidate lies in a version
/// directory.
pub(crate) fn newest_versions<'p>(paths: impl IntoIterator<Item = &'p [u8]>) -> NewestVersions {
    let mut newest = NewestVersions::new();
    for path in paths {
        for (parent, n) in versions_in(path) {
            let m = newest.entry(parent.to_vec()).or_insert(n);
            *m = (*m).max(n);
        }
    }
    newest
}

/// [`newest_versions`]: a parent directory's path, and its newest `vN`'s `N`.
pub(crate) type NewestVersions = BTreeMap<Vec<u8>, u32>;

/// The `vN` directories on `path`'s way: each as its parent's path (with its trailing `/`) and
/// `N`.
fn versions_in(path: &[u8]) -> impl Iterator<Item = (&[u8], u32)> {
    let dirs = path
        .iter()
        .rposition(|&b| b == b'/')
        .map_or(&path[..0], |end| &path[..end]);
    let mut at = 0;
    dirs.split(|&b| b == b'/').filter_map(move |part| {
        let start = at;
        at += part.len() + 1;
        version(part).map(|n| (&path[..start], n))
    })
}

/// The variants for one question.
#[derive(Debug, Clone, Default)]
pub(crate) struct Variants {
    /// Words naming another platform than the host's, less those the question names; sorted.
    other_platform: Vec<&'static str>,
    /// The versions the question names (`v3`): none of them is superseded for it.
    asked_versions: Vec<u32>,
}

impl Variants {
    /// The variants for `query` on `host` ([`std::env::consts::OS`]).
    pub(crate) fn new(query: &str, host: &str) -> Variants {
        let asked: HashSet<String> = crate::text::identifier_words(query).into_iter().collect();
        let families = host_families(host);
        let mut other_platform = Vec::new();
        let named = |words: &[&str]| words.iter().any(|w| asked.contains(*w));
        for (os, words) in PLATFORMS {
            if *os != host && !named(words) {
                other_platform.extend(words.iter().copied());
            }
        }
        for (family, words) in FAMILIES {
            if !families.contains(family) && !named(words) {
                other_platform.extend(words.iter().copied());
            }
        }
        other_platform.sort_unstable();
        let asked_versions = asked.iter().filter_map(|w| version(w.as_bytes())).collect();
        Variants {
            other_platform,
            asked_versions,
        }
    }

    /// What the prior of `path` (a repo-relative path's bytes) is multiplied by: [`VARIANT_PRIOR`]
    /// for a variant, else 1. `newest` gives the store's [`newest_versions`]; it is called only
    /// when `path` lies in a version directory.
    pub(crate) fn prior<'v>(
        &self,
        path: &[u8],
        newest: impl FnOnce() -> &'v NewestVersions,
    ) -> f32 {
        if self.is_variant(path, newest) {
            VARIANT_PRIOR
        } else {
            1.0
        }
    }

    fn is_variant<'v>(&self, path: &[u8], newest: impl FnOnce() -> &'v NewestVersions) -> bool {
        let (dirs, file) = match path.iter().rposition(|&b| b == b'/') {
            Some(end) => (&path[..end], &path[end + 1..]),
            None => (&path[..0], path),
        };
        let stem = file.split(|&b| b == b'.').next().unwrap_or_default();
        let platform = dirs
            .split(|&b| b == b'/')
            .chain(stem.split(|&b| b == b'-' || b == b'_'))
            .any(|w| self.names_other_platform(w));
        if platform {
            return true;
        }
        let mut versions = versions_in(path)
            .filter(|(_, n)| !self.asked_versions.contains(n))
            .peekable();
        if versions.peek().is_none() {
            return false;
        }
        let newest = newest();
        versions.any(|(parent, n)| newest.get(parent).is_some_and(|&m| m > n))
    }

    /// Whether `word`, in any case, is one of [`Variants::other_platform`]; without allocating,
    /// since every candidate file's path is looked at.
    fn names_other_platform(&self, word: &[u8]) -> bool {
        if word.is_empty() || word.len() > LONGEST_WORD {
            return false;
        }
        let mut lower = [0u8; LONGEST_WORD];
        for (l, b) in lower.iter_mut().zip(word) {
            *l = b.to_ascii_lowercase();
        }
        let lower = &lower[..word.len()];
        self.other_platform
            .binary_search_by(|w| w.as_bytes().cmp(lower))
            .is_ok()
    }
}

/// `N` of a directory named `vN` (`v3`, `V10`).
fn version(dir: &[u8]) -> Option<u32> {
    let digits = dir.strip_prefix(b"v").or_else(|| dir.strip_prefix(b"V"))?;
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::Variants;

    /// Checks which of `paths` are variants for `query` on `host`, among `paths` alone.
    fn check(host: &str, query: &str, paths: &[&str], expected: &[&str]) {
        let newest = super::newest_versions(paths.iter().map(|p| p.as_bytes()));
        let v = Variants::new(query, host);
        let got: Vec<&str> = paths
            .iter()
            .copied()
            .filter(|p| v.prior(p.as_bytes(), || &newest) < 1.0)
            .collect();
        assert_eq!(got, expected, "{host}: {query}");
    }

    #[test]
    fn every_platform_word_is_lower_case_and_within_the_longest() {
        for (_, words) in super::PLATFORMS.iter().chain(super::FAMILIES) {
            for w in *words {
                assert!(w.len() <= super::LONGEST_WORD, "{w}");
                assert_eq!(*w, w.to_ascii_lowercase(), "{w}");
            }
        }
    }

    #[test]
    fn another_platforms_code_is_a_variant_on_linux() {
        let paths = [
            "src/unix/fs.c",
            "src/win/fs.c",
            "src/unix/darwin.c",
            "src/unix/linux.c",
            "src/unix/os390.c",
            "src/unix/bsd-ifaddrs.c",
            "exec_windows.go",
            "exec_linux.go",
            "window.c",
            "winsock/mod.rs",
        ];
        check(
            "linux",
            "file system operations",
            &paths,
            &[
                "src/win/fs.c",
                "src/unix/darwin.c",
                "src/unix/os390.c",
                "src/unix/bsd-ifaddrs.c",
                "exec_windows.go",
            ],
        );
    }

    #[test]
    fn the_host_decides_which_platform_is_another() {
        let paths = ["src/unix/fs.c", "src/win/fs.c", "src/unix/darwin.c"];
        check(
            "windows",
            "fs",
            &paths,
            &["src/unix/fs.c", "src/unix/darwin.c"],
        );
        check("macos", "fs", &paths, &["src/win/fs.c"]);
    }

    #[test]
    fn a_question_that_names_a_variant_asks_about_it() {
        let paths = [
            "src/unix/fs.c",
            "src/win/fs.c",
            "v3/errors.ts",
            "v4/errors.ts",
        ];
        check("linux", "fs on Windows", &paths, &["v3/errors.ts"]);
        check("linux", "win32 file API", &paths, &["v3/errors.ts"]);
        check(
            "linux",
            "v3 compatibility errors",
            &paths,
            &["src/win/fs.c"],
        );
    }

    #[test]
    fn an_older_version_beside_a_newer_one_is_a_variant() {
        let paths = [
            "packages/zod/src/v3/types.ts",
            "packages/zod/src/v4/core/schemas.ts",
            "packages/zod/src/v4-mini/index.ts",
            "api/v1/users.go",
            "api/v10/users.go",
            "api/v2/users.go",
            "v1/only.rs",
            "tools/v8/readme.md",
            "lib/v2.rs",
        ];
        check(
            "linux",
            "schema types",
            &paths,
            &[
                "packages/zod/src/v3/types.ts",
                "api/v1/users.go",
                "api/v2/users.go",
            ],
        );
    }
}
