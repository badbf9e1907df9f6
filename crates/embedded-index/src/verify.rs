//! Verifying candidates exactly (the same matcher and binary rule as the literal search, so hits
//! equal ripgrep's), and ranking them.

use std::io;
use std::path::Path;

use grep_matcher::{LineTerminator, Matcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};

/// The longest snippet a backend hit carries; the facade cuts it further to its own cap.
const SNIPPET_WINDOW: usize = 16 * 1024;

pub(crate) fn matcher(
    query: &str,
    case_insensitive: bool,
) -> Result<RegexMatcher, grep_regex::Error> {
    RegexMatcherBuilder::new()
        .multi_line(true)
        .unicode(true)
        .octal(false)
        .fixed_strings(true)
        .case_insensitive(case_insensitive)
        .line_terminator(Some(b'\n'))
        .dot_matches_new_line(false)
        .ban_byte(Some(b'\x00'))
        .build(query)
}

pub(crate) fn searcher() -> Searcher {
    SearcherBuilder::new()
        .line_terminator(LineTerminator::byte(b'\n'))
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .heap_limit(Some(4 * 1024 * 1024))
        .build()
}

/// The first match in a file: line, 1-based byte column, the line (a window of it if long), and
/// whether the match is a whole word.
pub(crate) struct FirstMatch {
    pub(crate) line: u64,
    pub(crate) column: u64,
    pub(crate) snippet: String,
    pub(crate) whole_word: bool,
    pub(crate) definition: bool,
}

struct FirstSink<'a> {
    matcher: &'a RegexMatcher,
    found: Option<FirstMatch>,
}

impl Sink for FirstSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let line = mat.lines().next().unwrap_or(mat.bytes());
        let (start, end) = match self.matcher.find(line) {
            Ok(Some(m)) => (m.start(), m.end()),
            _ => (0, 0),
        };
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let lo = start.saturating_sub(SNIPPET_WINDOW / 4);
        let hi = (lo + SNIPPET_WINDOW).min(body.len());
        let word = |b: Option<&u8>| b.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
        let whole_word =
            !word(start.checked_sub(1).and_then(|i| body.get(i))) && !word(body.get(end));
        let trimmed = String::from_utf8_lossy(&body[..start.min(body.len())]);
        let head = trimmed.trim_start();
        let definition = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "def ",
            "class ",
            "struct ",
            "pub struct ",
            "enum ",
            "pub enum ",
            "trait ",
            "pub trait ",
            "impl ",
            "type ",
            "func ",
            "interface ",
            "#define ",
            "static ",
            "const ",
            "let ",
            "var ",
        ]
        .iter()
        .any(|k| head.starts_with(k));
        self.found = Some(FirstMatch {
            line: mat.line_number().unwrap_or(1),
            column: start as u64 + 1,
            snippet: String::from_utf8_lossy(&body[lo.min(hi)..hi]).into_owned(),
            whole_word,
            definition,
        });
        Ok(false)
    }
}

/// Searches one file for its first match. `None` when it has none, is binary before one, or
/// cannot be read (a file deleted since it was indexed simply yields no hit). Also says whether
/// the file was larger than the searcher's initial buffer, after which the caller starts a fresh
/// searcher (see the literal search: this keeps binary detection deterministic).
pub(crate) fn first_match(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &Path,
) -> (Option<FirstMatch>, bool) {
    let mut sink = FirstSink {
        matcher,
        found: None,
    };
    let Ok(file) = std::fs::File::open(path) else {
        return (None, false);
    };
    let grown = file.metadata().map_or(true, |m| m.len() > 64 * 1024);
    if searcher.search_file(matcher, &file, &mut sink).is_err() {
        return (None, grown);
    }
    (sink.found, grown)
}

/// A path's prior: ordinary source first; tests, docs, vendored and generated code later; deeper
/// paths slightly later. In (0, 1].
pub(crate) fn prior(path: &str) -> f64 {
    let lower = path.to_ascii_lowercase();
    let mut p: f64 = 1.0;
    let has = |needle: &str| lower.split('/').any(|seg| seg == needle);
    if has("vendor")
        || has("third_party")
        || has("node_modules")
        || has("external")
        || lower.contains(".min.")
        || lower.contains("generated")
    {
        p *= 0.4;
    }
    if has("test")
        || has("tests")
        || has("testing")
        || has("selftests")
        || lower.contains("_test.")
        || lower.contains(".test.")
        || lower.contains("spec")
    {
        p *= 0.6;
    }
    if has("docs")
        || has("doc")
        || has("documentation")
        || lower.ends_with(".md")
        || lower.ends_with(".txt")
        || lower.ends_with(".rst")
    {
        p *= 0.8;
    }
    let depth = path.matches('/').count() as f64;
    p / (1.0 + 0.03 * depth)
}

/// [`prior`] quantized to 1..=255, as segments store it.
pub(crate) fn quantized_prior(path: &str) -> u8 {
    (prior(path) * 255.0).round().clamp(1.0, 255.0) as u8
}

/// A hit's score in [0, 1]: half the path prior, half how the match looks.
pub(crate) fn score(prior: f64, m: &FirstMatch) -> f64 {
    let quality = match (m.whole_word, m.definition) {
        (true, true) => 1.0,
        (true, false) => 0.7,
        (false, true) => 0.6,
        (false, false) => 0.4,
    };
    (0.5 * prior + 0.5 * quality).clamp(0.0, 1.0)
}
