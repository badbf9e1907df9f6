//! Walk names: every selected file has one, a file whose name is not UTF-8 too.
//!
//! A Linux file name is any bytes but `/` and NUL, so a worktree can hold `bad\xff.txt`. ripgrep
//! searches it and prints its name lossily; a JSON answer cannot carry it at all. Leaving such a
//! file out of the walk would make it vanish silently, so the walk names it instead: its UTF-8
//! runs are kept and every byte that is not part of one is written as NUL and two lowercase hex
//! digits (`bad\0ff.txt`). No real name holds a NUL, so a walk name never collides with a UTF-8
//! name; every `/` stays where it was, so scope containment and path order work on it unchanged;
//! and no answer can name it, since the trust gate refuses a NUL in a path
//! (`index_guard::check_path`). [`crate::RootDir`] opens a file by its walk name, and a searcher
//! that meets one counts the file when it matches (`stats.files_skipped.non_utf8_path`).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use index_contract::SkippedFiles;

/// The walk name of the repo-relative path `raw`, given as its bytes (`/`-separated): `raw`
/// itself when it is UTF-8, else its escaped form.
pub fn walk_name(raw: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(raw) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => {
            let mut out = String::with_capacity(raw.len() + 8);
            for chunk in raw.utf8_chunks() {
                out.push_str(chunk.valid());
                for b in chunk.invalid() {
                    out.push('\0');
                    out.push(char::from(HEX[usize::from(b >> 4)]));
                    out.push(char::from(HEX[usize::from(b & 0xF)]));
                }
            }
            Cow::Owned(out)
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether `name` is the walk name of a path that is not UTF-8: an answer may never name it.
pub fn is_non_utf8_name(name: &str) -> bool {
    name.contains('\0')
}

/// The bytes of the path whose walk name is `name`. A NUL not followed by two hex digits (which
/// only damaged data could hold) is kept as it is, so opening such a path fails.
pub fn name_bytes(name: &str) -> Cow<'_, [u8]> {
    if !is_non_utf8_name(name) {
        return Cow::Borrowed(name.as_bytes());
    }
    let b = name.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let byte = (b[i] == 0)
            .then(|| Some((hex_value(*b.get(i + 1)?)? << 4) | hex_value(*b.get(i + 2)?)?))
            .flatten();
        match byte {
            Some(v) => {
                out.push(v);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// Counts in `skipped` a file that holds a match but whose walk name `name` no answer may carry:
/// under `non_utf8_path` when it stands for a name that is not UTF-8, else under `refused_path`
/// (a name the trust gate refuses).
pub fn count_unserved(skipped: &mut SkippedFiles, name: &str) {
    if is_non_utf8_name(name) {
        skipped.non_utf8_path += 1;
    } else {
        skipped.refused_path += 1;
    }
}

fn hex_value(c: u8) -> Option<u8> {
    HEX.iter().position(|&h| h == c).map(|v| v as u8)
}

/// The path under `root` whose walk name is `name` (`root` itself for `""`), for callers that use
/// `std::fs` rather than [`crate::RootDir`].
pub fn name_path(root: &Path, name: &str) -> PathBuf {
    if name.is_empty() {
        return root.to_path_buf();
    }
    root.join(os_path(name))
}

/// The repo-relative path whose walk name is `name`, as the OS spells it.
pub(crate) fn os_path(name: &str) -> Cow<'_, Path> {
    if !is_non_utf8_name(name) {
        return Cow::Borrowed(Path::new(name));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Cow::Owned(Path::new(std::ffi::OsStr::from_bytes(&name_bytes(name))).to_path_buf())
    }
    // Elsewhere names are UTF-16, and a walk name stands for one only on Unix: the escaped form
    // names nothing, so opening it fails.
    #[cfg(not(unix))]
    {
        Cow::Borrowed(Path::new(name))
    }
}

#[cfg(test)]
mod tests {
    use super::{is_non_utf8_name, name_bytes, walk_name};

    fn check(raw: &[u8], expected: &str) {
        let name = walk_name(raw);
        assert_eq!(name, expected, "{raw:?}");
        assert_eq!(is_non_utf8_name(&name), std::str::from_utf8(raw).is_err());
        assert_eq!(&*name_bytes(&name), raw, "{raw:?} round trip");
    }

    #[test]
    fn walk_names_escape_exactly_the_bytes_that_are_not_utf8_and_round_trip() {
        check(b"src/main.rs", "src/main.rs");
        check("日本語/名前.rs".as_bytes(), "日本語/名前.rs");
        check(b"bad\xff.txt", "bad\0ff.txt");
        check(b"d\xe9j\xe0/x.txt", "d\0e9j\0e0/x.txt");
        // A truncated sequence is escaped byte by byte; the valid text around it is kept.
        check(b"caf\xc3/\xe2\x82", "caf\0c3/\0e2\082");
        check(b"\xff\xfe", "\0ff\0fe");
        // A valid character after an escape is not read as more hex digits.
        check("\u{ff}é\u{301}".as_bytes(), "\u{ff}é\u{301}");
        check(b"\xffab", "\0ffab");
    }

    #[test]
    fn a_damaged_walk_name_decodes_to_bytes_no_file_can_have() {
        assert_eq!(&*name_bytes("a\0zz"), b"a\0zz");
        assert_eq!(&*name_bytes("a\0f"), b"a\0f");
    }
}
