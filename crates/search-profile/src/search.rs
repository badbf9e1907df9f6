//! Matching: ripgrep's fixed-string matcher and searcher, for every searcher.

use std::fs::File;
use std::io::{self, Read, Seek};

use grep_matcher::{LineTerminator, Matcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};

/// grep-searcher's initial line buffer capacity.
const INITIAL_BUFFER: u64 = 64 * 1024;

/// A compiled query: ripgrep's fixed-string matcher with its defaults.
#[derive(Debug, Clone)]
pub struct LiteralMatcher {
    inner: RegexMatcher,
    max_match_bytes: usize,
}

impl LiteralMatcher {
    /// The underlying grep matcher.
    pub fn inner(&self) -> &RegexMatcher {
        &self.inner
    }

    /// An upper bound on the bytes of any match: no match of the fixed string is longer than 4
    /// bytes per character of the query (case folding can change a character's encoded length,
    /// never beyond 4 bytes).
    pub fn max_match_bytes(&self) -> usize {
        self.max_match_bytes
    }

    /// Where the first match in `haystack` lies, if any.
    pub fn find(&self, haystack: &[u8]) -> Option<(usize, usize)> {
        self.inner
            .find(haystack)
            .ok()
            .flatten()
            .map(|m| (m.start(), m.end()))
    }
}

/// Compiles `query` as ripgrep compiles `rg -F QUERY` (`-i` when `case_insensitive`).
pub fn matcher(query: &str, case_insensitive: bool) -> Result<LiteralMatcher, grep_regex::Error> {
    let inner = RegexMatcherBuilder::new()
        .multi_line(true)
        .unicode(true)
        .octal(false)
        .fixed_strings(true)
        .case_insensitive(case_insensitive)
        .line_terminator(Some(b'\n'))
        .dot_matches_new_line(false)
        .ban_byte(Some(b'\x00'))
        .build(query)?;
    Ok(LiteralMatcher {
        inner,
        max_match_bytes: 4 * query.chars().count(),
    })
}

/// Tells a search whether to stop now (deadline, cancellation). Checked on every read, so even a
/// huge file without matches is abandoned promptly.
pub trait SearchControl {
    /// Whether the search must stop.
    fn should_stop(&self) -> bool;
}

/// A [`SearchControl`] that never stops.
#[derive(Debug, Clone, Copy, Default)]
pub struct NeverStop;

impl SearchControl for NeverStop {
    fn should_stop(&self) -> bool {
        false
    }
}

/// One matching line, as a sink sees it.
#[derive(Debug)]
pub struct LineMatch<'a> {
    /// 1-based line number.
    pub line_number: u64,
    /// The line (with its terminator), or on the stream path a window of it.
    pub line: &'a [u8],
    /// The first match's byte range within `line`.
    pub start: usize,
    /// See `start`.
    pub end: usize,
    /// 1-based byte column of the match within the whole line.
    pub column: u64,
    /// `line` is a window of a longer line.
    pub partial: bool,
}

/// How the search of one file went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileOutcome {
    /// The file is binary (a NUL byte): the search stopped there, as ripgrep's does.
    pub binary: bool,
    /// A line was longer than the heap limit, so the file was searched as a bounded stream.
    pub streamed: bool,
    /// The [`SearchControl`] stopped the search.
    pub stopped: bool,
}

/// Why a file could not be searched.
#[derive(Debug)]
pub enum SearchFileError {
    /// Reading it failed.
    Read(io::Error),
}

impl std::fmt::Display for SearchFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the file could not be read")
    }
}

impl std::error::Error for SearchFileError {}

/// ripgrep's searcher for one thread, with the fresh-searcher rule and the bounded stream.
///
/// **The fresh-searcher rule.** grep-searcher keeps its line buffer between files, grown to the
/// longest line it has seen. A grown buffer changes where binary detection stops in the next file
/// (a larger first read can reach a NUL before any match is searched), so the same file could
/// give different hits depending on what the thread searched before. After any file with a line
/// longer than half the initial buffer (half, to cover UTF-16 transcoding growth), the searcher
/// is rebuilt: every file is searched as by a fresh searcher.
///
/// **Line numbers only where they are needed.** Counting lines costs a pass over every byte, and
/// most files hold no match: each file is first searched without line numbers, up to its first
/// match, and only a file with a match is searched again from its start with them. Both searchers
/// are fresh for every file and read the same bytes, so they agree on where a match or a binary
/// file's NUL stops the search.
#[derive(Debug)]
pub struct FileSearcher {
    searcher: Searcher,
    /// The same searcher without line numbers, to find whether a file matches at all.
    gate: Searcher,
    heap_limit: usize,
    stream_window: usize,
}

impl Default for FileSearcher {
    fn default() -> Self {
        FileSearcher::new(crate::DEFAULT_HEAP_LIMIT, 16 * 1024)
    }
}

fn build_searcher(heap_limit: usize) -> Searcher {
    build_searcher_numbered(heap_limit, true)
}

fn build_searcher_numbered(heap_limit: usize, line_number: bool) -> Searcher {
    SearcherBuilder::new()
        .line_terminator(LineTerminator::byte(b'\n'))
        .line_number(line_number)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .heap_limit(Some(heap_limit))
        .build()
}

impl FileSearcher {
    /// A searcher holding at most `heap_limit` bytes of one line; files with longer lines are
    /// streamed, with snippets of about `stream_window` bytes on each side of a match.
    pub fn new(heap_limit: usize, stream_window: usize) -> FileSearcher {
        FileSearcher {
            searcher: build_searcher(heap_limit),
            gate: build_searcher_numbered(heap_limit, false),
            heap_limit,
            stream_window,
        }
    }

    /// Searches `file`, calling `sink` for each matching line in order until it returns `false`.
    pub fn search(
        &mut self,
        matcher: &LiteralMatcher,
        mut file: File,
        control: &dyn SearchControl,
        mut sink: impl FnMut(LineMatch<'_>) -> bool,
    ) -> Result<FileOutcome, SearchFileError> {
        if let Some(outcome) = self.without_match(matcher, &file, control) {
            return Ok(outcome);
        }
        file.rewind().map_err(SearchFileError::Read)?;
        let mut outcome = FileOutcome::default();
        let mut reader = GuardedReader {
            inner: &file,
            control,
            stopped: false,
            failed: None,
            run: 0,
            longest: 0,
        };
        let mut lines = LineSink {
            matcher,
            sink: &mut sink,
            binary: false,
            last_line: 0,
        };
        let result = self
            .searcher
            .search_reader(matcher.inner(), &mut reader, &mut lines);
        let longest = reader.longest.max(reader.run);
        let (stopped, failed) = (reader.stopped, reader.failed.take());
        outcome.binary = lines.binary;
        let reported = lines.last_line;
        match result {
            Ok(()) => {}
            Err(_) if stopped => outcome.stopped = true,
            Err(_) if failed.is_some() => {
                self.refresh_if_grown(longest);
                return Err(SearchFileError::Read(
                    failed.unwrap_or_else(|| io::Error::other("read failed")),
                ));
            }
            Err(_) => {
                // The only other error is a line longer than the heap limit: search the file
                // again as a stream with bounded memory.
                self.searcher = build_searcher(self.heap_limit);
                file.rewind().map_err(SearchFileError::Read)?;
                // The sink already has the lines the searcher reported before the long line: the
                // stream, which starts over, passes on only the lines after them.
                let mut rest = |m: LineMatch<'_>| m.line_number <= reported || sink(m);
                let s = crate::stream::search(
                    &mut file,
                    matcher,
                    self.stream_window,
                    control,
                    &mut rest,
                )
                .map_err(SearchFileError::Read)?;
                return Ok(FileOutcome {
                    binary: s.binary,
                    streamed: true,
                    stopped: s.stopped,
                });
            }
        }
        self.refresh_if_grown(longest);
        Ok(outcome)
    }

    /// The outcome of searching `file` when the searcher without line numbers finds no match in
    /// it and nothing went wrong; `None` otherwise (a match, a stop, a failed read, an over-long
    /// line), and then the file must be searched with line numbers.
    fn without_match(
        &mut self,
        matcher: &LiteralMatcher,
        file: &File,
        control: &dyn SearchControl,
    ) -> Option<FileOutcome> {
        let mut reader = GuardedReader {
            inner: file,
            control,
            stopped: false,
            failed: None,
            run: 0,
            longest: 0,
        };
        let mut gate = MatchGate {
            found: false,
            binary: false,
        };
        let result = self
            .gate
            .search_reader(matcher.inner(), &mut reader, &mut gate);
        if reader.longest.max(reader.run) > INITIAL_BUFFER / 2 {
            self.gate = build_searcher_numbered(self.heap_limit, false);
        }
        (result.is_ok() && !gate.found).then_some(FileOutcome {
            binary: gate.binary,
            ..FileOutcome::default()
        })
    }

    fn refresh_if_grown(&mut self, longest_line: u64) {
        if longest_line > INITIAL_BUFFER / 2 {
            self.searcher = build_searcher(self.heap_limit);
        }
    }
}

/// A reader that stops the search when told to, and measures the longest line it passed on.
struct GuardedReader<'a> {
    inner: &'a File,
    control: &'a dyn SearchControl,
    stopped: bool,
    failed: Option<io::Error>,
    /// Bytes since the last line terminator, and the longest line seen so far.
    run: u64,
    longest: u64,
}

impl Read for GuardedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.control.should_stop() {
            self.stopped = true;
            return Err(io::Error::other("search stopped"));
        }
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            Err(e) => {
                let kind = e.kind();
                self.failed = Some(e);
                return Err(io::Error::new(kind, "read failed"));
            }
        };
        // Two searches per read: a chunk no longer than the buffer cannot hold a whole over-long
        // line between two terminators.
        let chunk = &buf[..n];
        match memchr::memchr(b'\n', chunk) {
            Some(first) => {
                self.longest = self.longest.max(self.run + first as u64);
                let last = memchr::memrchr(b'\n', chunk).unwrap_or(first);
                self.run = (n - last - 1) as u64;
            }
            None => self.run += n as u64,
        }
        Ok(n)
    }
}

/// Notes whether a file has a match (and stops there) or is binary.
struct MatchGate {
    found: bool,
    binary: bool,
}

impl Sink for MatchGate {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, _: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.found = true;
        Ok(false)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

struct LineSink<'a, F> {
    matcher: &'a LiteralMatcher,
    sink: &'a mut F,
    binary: bool,
    /// The last line number passed to `sink`.
    last_line: u64,
}

impl<F: FnMut(LineMatch<'_>) -> bool> Sink for LineSink<'_, F> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let first = mat.line_number().unwrap_or(1);
        for (i, line) in mat.lines().enumerate() {
            // The searcher reported this line as matching; find cannot disagree, but if it did,
            // the line is still a hit and its column is the line start.
            let (start, end) = self.matcher.find(line).unwrap_or((0, 0));
            self.last_line = first + i as u64;
            let go_on = (self.sink)(LineMatch {
                line_number: first + i as u64,
                line,
                start,
                end,
                column: start as u64 + 1,
                partial: false,
            });
            if !go_on {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, Write};

    use super::{FileSearcher, LineSink, NeverStop, build_searcher, matcher};

    /// (line, column) of each hit, and whether the file was binary.
    type Found = (Vec<(u64, u64)>, bool);

    fn file_of(text: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(text).unwrap();
        f.rewind().unwrap();
        f
    }

    /// What a fresh line-numbering searcher reports for `text`: the answer before the search
    /// learned to skip line numbers in files without a match.
    fn numbered(text: &[u8], query: &str) -> Found {
        let m = matcher(query, false).unwrap();
        let mut hits = Vec::new();
        let mut sink = |l: super::LineMatch<'_>| {
            hits.push((l.line_number, l.column));
            true
        };
        let mut lines = LineSink {
            matcher: &m,
            sink: &mut sink,
            binary: false,
            last_line: 0,
        };
        build_searcher(crate::DEFAULT_HEAP_LIMIT)
            .search_reader(m.inner(), file_of(text), &mut lines)
            .unwrap();
        let binary = lines.binary;
        (hits, binary)
    }

    #[test]
    fn files_without_a_match_are_searched_alike_with_or_without_line_numbers() {
        let long = "x".repeat(100_000);
        let filler = "filler line\n".repeat(20_000);
        let cases: Vec<(String, &str)> = vec![
            ("nothing here\n".into(), "needle"),
            ("a\nb\nc needle\nd needle\n".into(), "needle"),
            ("a\n\0b needle\n".into(), "needle"),
            ("needle\n\0\n".into(), "needle"),
            (format!("{filler}needle at the end"), "needle"),
            (format!("{filler}\0{filler}needle\n"), "needle"),
            (format!("{long}\nneedle after a long line\n"), "needle"),
            (format!("{long}\n{long}\n"), "needle"),
            ("short needle after the long lines\n".into(), "needle"),
            (format!("{filler}needle\n{long}\n\0"), "needle"),
        ];
        // One searcher for every file in turn, as a search thread uses it.
        let mut searcher = FileSearcher::default();
        for (text, query) in &cases {
            let m = matcher(query, false).unwrap();
            let mut hits = Vec::new();
            let outcome = searcher
                .search(&m, file_of(text.as_bytes()), &NeverStop, |l| {
                    hits.push((l.line_number, l.column));
                    true
                })
                .unwrap();
            assert_eq!(
                (hits, outcome.binary),
                numbered(text.as_bytes(), query),
                "{} bytes",
                text.len()
            );
        }
    }
}
