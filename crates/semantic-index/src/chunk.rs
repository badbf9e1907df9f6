//! Chunks: pieces of a file of about [`TARGET_BYTES`], cut where code usually changes subject.

use sha2::{Digest, Sha256};

/// The size a chunk aims at, as semble's chunks do.
pub const TARGET_BYTES: usize = 1500;

/// One piece of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The file's path, as the caller named it.
    pub path: String,
    /// The first line, 1-based.
    pub start_line: u32,
    /// The last line, inclusive.
    pub end_line: u32,
    /// The chunk's text (its lines, each with its newline).
    pub text: String,
    /// The sha256 of `text`: the key under which its vectors are cached.
    pub hash: [u8; 32],
}

/// Cuts a file into chunks by line merging: the file is first split into blocks after each blank
/// line and each definition start (a line whose first word after modifiers such as `pub` or
/// `async` is `def`, `class`, `fn`, `func`, `function`, …), then consecutive blocks are merged while
/// they fit in [`TARGET_BYTES`]; a block longer than that is cut between lines. Every line belongs
/// to exactly one chunk; blank-only chunks are dropped.
pub fn chunk_file(path: &str, text: &str) -> Vec<Chunk> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    // Block boundaries: indices of lines that start a block.
    let mut blocks: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for (i, line) in lines.iter().enumerate().skip(1) {
        let prev_blank = lines[i - 1].trim().is_empty();
        if (prev_blank && !line.trim().is_empty()) || is_definition(line) {
            blocks.push((start, i));
            start = i;
        }
    }
    if start < lines.len() {
        blocks.push((start, lines.len()));
    }
    let bytes = |a: usize, b: usize| lines[a..b].iter().map(|l| l.len()).sum::<usize>();
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    for (a, b) in blocks {
        if bytes(a, b) > TARGET_BYTES {
            let mut s = a;
            while s < b {
                let mut e = s;
                let mut size = 0;
                while e < b && (e == s || size + lines[e].len() <= TARGET_BYTES) {
                    size += lines[e].len();
                    e += 1;
                }
                pieces.push((s, e));
                s = e;
            }
            continue;
        }
        match pieces.last_mut() {
            Some(last) if last.1 == a && bytes(last.0, b) <= TARGET_BYTES => last.1 = b,
            _ => pieces.push((a, b)),
        }
    }
    pieces
        .into_iter()
        .filter(|&(a, b)| lines[a..b].iter().any(|l| !l.trim().is_empty()))
        .map(|(a, b)| {
            let text: String = lines[a..b].concat();
            Chunk {
                path: path.to_owned(),
                start_line: a as u32 + 1,
                end_line: b as u32,
                hash: Sha256::digest(text.as_bytes()).into(),
                text,
            }
        })
        .collect()
}

/// Whether a line starts a definition in one of the common languages: the heuristic that stands
/// in for tree-sitter in this slice.
pub(crate) fn is_definition(line: &str) -> bool {
    definition_name(line).is_some()
}

/// The name a definition line introduces (`def parse_args(` → `parse_args`), if it is one.
pub(crate) fn definition_name(line: &str) -> Option<&str> {
    const KEYWORDS: &[&str] = &[
        "def",
        "class",
        "fn",
        "struct",
        "enum",
        "trait",
        "impl",
        "mod",
        "func",
        "function",
        "interface",
        "type",
        "macro_rules!",
    ];
    const MODIFIERS: &[&str] = &[
        "pub",
        "pub(crate)",
        "async",
        "export",
        "default",
        "public",
        "private",
        "protected",
        "static",
        "unsafe",
        "const",
        "abstract",
        "final",
        "extern",
    ];
    let mut words = line
        .trim_start()
        .split(|c: char| c.is_whitespace() || c == '(' || c == '<' || c == ':' || c == '{')
        .filter(|w| !w.is_empty());
    let mut word = words.next()?;
    while MODIFIERS.contains(&word) {
        word = words.next()?;
    }
    if !KEYWORDS.contains(&word) {
        return None;
    }
    let name = words.next()?;
    name.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        .then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &[(u32, u32)]) {
        let chunks = chunk_file("f.py", input);
        let ranges: Vec<(u32, u32)> = chunks.iter().map(|c| (c.start_line, c.end_line)).collect();
        assert_eq!(ranges, expected, "chunks of {input:?}");
        for c in &chunks {
            assert_eq!(c.hash, <[u8; 32]>::from(Sha256::digest(c.text.as_bytes())));
        }
    }

    #[test]
    fn small_blocks_merge_into_one_chunk() {
        check("def a():\n    pass\n\ndef b():\n    pass\n", &[(1, 5)]);
    }

    #[test]
    fn blocks_split_where_the_target_is_reached() {
        let body = "    x = 1\n".repeat(100);
        let input = format!("def a():\n{body}\ndef b():\n{body}");
        check(&input, &[(1, 102), (103, 203)]);
    }

    #[test]
    fn a_block_longer_than_the_target_is_cut_between_lines() {
        let input = "x = 1\n".repeat(300);
        check(&input, &[(1, 250), (251, 300)]);
    }

    #[test]
    fn blank_files_have_no_chunk() {
        check("\n\n  \n", &[]);
    }

    #[test]
    fn definition_names_are_found_behind_modifiers() {
        for (line, name) in [
            ("pub fn parse_args(x: u8) {", Some("parse_args")),
            ("    async def fetch(self):", Some("fetch")),
            ("class Foo(Bar):", Some("Foo")),
            ("public static class Widget {", Some("Widget")),
            ("x = def_thing()", None),
        ] {
            assert_eq!(definition_name(line), name, "{line:?}");
        }
    }
}
