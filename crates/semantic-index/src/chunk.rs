//! Chunks: pieces of a file of about [`TARGET_BYTES`], cut where the code changes subject.
//!
//! Rust, Python, C, C++, Go, JavaScript, TypeScript and Java files are cut along their syntax
//! tree ([`syntax`]); every other file, and a file whose parse fails, by line merging.

use sha2::{Digest, Sha256};

mod syntax;

#[cfg(test)]
mod tests;

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
    /// The sha256 of the chunk's [`searched_text`] (its path and its text): the key under which
    /// its vectors are cached, since every vector reads the path too.
    pub hash: [u8; 32],
    /// The names of the definitions the chunk holds (functions, methods, types, classes,
    /// macros, …), in source order: from the syntax tree's name nodes where the file was parsed,
    /// else from its definition lines.
    pub defines: Vec<String>,
}

/// Cuts a file into chunks that together hold every byte of it exactly once (a file of blank
/// lines only has none).
///
/// A file in a language tree-sitter is built with here (chosen by extension) follows its syntax:
/// top-level definitions are chunks, a definition bigger than [`TARGET_BYTES`] is split at its
/// children (methods) or else between lines, small neighbouring items merge up to
/// [`TARGET_BYTES`], and a leading doc comment stays with its definition. Any other file, one
/// bigger than 1 MiB, or one whose parse times out or is mostly errors, is cut by line merging
/// (blocks after blank lines and definition lines, merged up to [`TARGET_BYTES`]).
pub fn chunk_file(path: &str, text: &str) -> Vec<Chunk> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    match syntax::spans(path, text) {
        Some(spans) => {
            let starts = line_starts(text);
            let line_of = |b: usize| starts.partition_point(|&s| s <= b) as u32;
            spans
                .into_iter()
                .map(|s| {
                    let mut chunk = make_chunk(path, &text[s.start..s.end], line_of(s.start));
                    chunk.end_line = line_of(s.end - 1);
                    chunk.defines = s.names;
                    chunk
                })
                .collect()
        }
        None => line_chunks(path, text),
    }
}

/// Cuts a file into chunks by line merging: the file is first split into blocks after each blank
/// line and each definition start (a line whose first word after modifiers such as `pub` or
/// `async` is `def`, `class`, `fn`, `func`, `function`, …), then consecutive blocks are merged while
/// they fit in [`TARGET_BYTES`]; a block longer than that is cut between lines. Every line belongs
/// to exactly one chunk: a run of blank lines that would make a chunk of its own joins the chunk
/// before it (or after it, at the start of the file).
pub(crate) fn line_chunks(path: &str, text: &str) -> Vec<Chunk> {
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
    let blank = |&(a, b): &(usize, usize)| lines[a..b].iter().all(|l| l.trim().is_empty());
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for piece in pieces {
        match kept.last_mut() {
            Some(last) if blank(&piece) || blank(last) => last.1 = piece.1,
            _ => kept.push(piece),
        }
    }
    kept.into_iter()
        .filter(|p| !blank(p))
        .map(|(a, b)| {
            let mut chunk = make_chunk(path, &lines[a..b].concat(), a as u32 + 1);
            chunk.defines = lines[a..b]
                .iter()
                .filter_map(|l| definition_name(l))
                .map(str::to_owned)
                .collect();
            chunk
        })
        .collect()
}

/// The text a chunk of the file at `path` is searched by: the path on a line of its own, then the
/// chunk. The path says what code is about where the chunk does not (`statistics/median.py`
/// above `n = len(data)`), so every signal reads it: BM25's terms, the static vector and
/// MiniLM's re-rank.
pub fn searched_text(path: &str, text: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1 + text.len());
    out.push_str(path);
    out.push('\n');
    out.push_str(text);
    out
}

/// A chunk of `text` starting at line `start_line`, its end line counted from its newlines.
fn make_chunk(path: &str, text: &str, start_line: u32) -> Chunk {
    let newlines = text.matches('\n').count() - usize::from(text.ends_with('\n'));
    Chunk {
        path: path.to_owned(),
        start_line,
        end_line: start_line + newlines as u32,
        // The digest of `searched_text(path, text)`, without building that string.
        hash: Sha256::new()
            .chain_update(path.as_bytes())
            .chain_update(b"\n")
            .chain_update(text.as_bytes())
            .finalize()
            .into(),
        text: text.to_owned(),
        defines: Vec::new(),
    }
}

/// The byte offsets at which lines start.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&s| s < text.len())
        .collect()
}

/// Whether a line starts a definition in one of the common languages: a heuristic that stands
/// in for tree-sitter where no syntax tree is built.
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
