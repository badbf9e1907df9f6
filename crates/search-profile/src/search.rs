//! Searching a file: ripgrep's searcher with the fresh-searcher rule, context lines and the count
//! of matching lines, handing over to the bounded stream for over-long lines.

use std::collections::VecDeque;
use std::io::{self, Read, Seek};

use grep_matcher::{LineTerminator, Matcher};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};

use crate::control::SearchControl;
use crate::matcher::{LineMatch, QueryMatcher};

/// grep-searcher's initial line buffer capacity.
const INITIAL_BUFFER: u64 = 64 * 1024;

/// Context lines around each matching line: ripgrep's `-B before -A after`, per matching line.
///
/// Each matching line gets the `before` lines that precede it and the `after` lines that follow
/// it, whether or not those lines match too (ripgrep prints each line once and merges the
/// neighbourhoods of close matches; here every hit carries its own). A line is given without its
/// terminator (`\n` or `\r\n`), bytes that are not UTF-8 replaced with U+FFFD, cut to
/// `line_bytes` bytes on a character boundary.
///
/// With `after > 0`, a matching line reaches the sink only once its `after` lines have been read,
/// so the searcher holds a copy of at most `after + 1` matching lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContextConfig {
    /// Lines before each matching line (`-B`).
    pub before: usize,
    /// Lines after each matching line (`-A`).
    pub after: usize,
    /// The most bytes kept of each context line.
    pub line_bytes: usize,
}

impl ContextConfig {
    /// Whether any context is asked for.
    pub fn any(&self) -> bool {
        self.before > 0 || self.after > 0
    }
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
    /// How many matching lines reached the sink. When the sink never asked to stop and the
    /// search was not stopped, this is ripgrep's `-c` for the file: every matching line, each
    /// counted once however many matches it holds.
    pub matching_lines: u64,
}

/// Why a file could not be searched.
#[derive(Debug)]
pub enum SearchFileError {
    /// Reading it failed.
    Read(io::Error),
    /// A line is longer than the heap limit, and this search cannot run as the bounded stream:
    /// the query is a regex whose matches have no length bound, or context lines were asked for.
    /// ripgrep has no heap limit and would hold the whole line in memory; we do not. Lines before
    /// the long one may already have reached the sink: the caller discards the file's hits and
    /// reports the file as not searched. A multi-line search reads the whole file, so there the
    /// file is over [`MULTI_LINE_HEAP_LIMIT`].
    LineTooLong,
}

impl std::fmt::Display for SearchFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SearchFileError::Read(_) => "the file could not be read",
            SearchFileError::LineTooLong => {
                "a line is longer than the heap limit and the search cannot stream it"
            }
        })
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
/// **Lines over the heap limit.** Such a file is searched again as a bounded stream (see
/// `stream.rs`) when the matcher has a match-length bound ([`QueryMatcher::max_match_bytes`]) and
/// no context is asked for; otherwise the search of the file fails with
/// [`SearchFileError::LineTooLong`], never with a wrong hit.
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
    context: ContextConfig,
}

impl Default for FileSearcher {
    fn default() -> Self {
        FileSearcher::new(crate::DEFAULT_HEAP_LIMIT, 16 * 1024)
    }
}

fn build_searcher(heap_limit: usize, context: ContextConfig) -> Searcher {
    build_searcher_numbered(heap_limit, true, context)
}

fn build_searcher_numbered(
    heap_limit: usize,
    line_number: bool,
    context: ContextConfig,
) -> Searcher {
    searcher_builder(heap_limit, line_number, context).build()
}

/// ripgrep's searcher settings, once: lines ended by `\n`, binary detection at the first NUL.
fn searcher_builder(
    heap_limit: usize,
    line_number: bool,
    context: ContextConfig,
) -> SearcherBuilder {
    let mut builder = SearcherBuilder::new();
    builder
        .line_terminator(LineTerminator::byte(b'\n'))
        .line_number(line_number)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .heap_limit(Some(heap_limit))
        .before_context(context.before)
        .after_context(context.after);
    builder
}

/// The most bytes of one file a multi-line search holds: it reads the whole file, as `rg -U` does.
/// A larger file is not searched ([`SearchFileError::LineTooLong`]), never searched in part.
pub const MULTI_LINE_HEAP_LIMIT: usize = 32 * 1024 * 1024;

fn build_multi_line_searcher(context: ContextConfig) -> Searcher {
    searcher_builder(MULTI_LINE_HEAP_LIMIT, true, context)
        .multi_line(true)
        .build()
}

impl FileSearcher {
    /// A searcher holding at most `heap_limit` bytes of one line; files with longer lines are
    /// streamed, with snippets of about `stream_window` bytes on each side of a match.
    pub fn new(heap_limit: usize, stream_window: usize) -> FileSearcher {
        FileSearcher {
            searcher: build_searcher(heap_limit, ContextConfig::default()),
            gate: build_searcher_numbered(heap_limit, false, ContextConfig::default()),
            heap_limit,
            stream_window,
            context: ContextConfig::default(),
        }
    }

    /// The same searcher, giving each matching line its context lines.
    pub fn with_context(mut self, context: ContextConfig) -> FileSearcher {
        self.context = context;
        self.searcher = build_searcher(self.heap_limit, context);
        self
    }

    /// Searches `file`, calling `sink` for each matching line in order until it returns `false`.
    /// To count matching lines (`-c`), keep returning `true` and read
    /// [`FileOutcome::matching_lines`].
    ///
    /// `file` is any seekable reader, so that a backend holding contents (a database row) verifies
    /// them exactly as a file on disk is searched.
    pub fn search<R: Read + Seek>(
        &mut self,
        matcher: &QueryMatcher,
        mut file: R,
        control: &dyn SearchControl,
        mut sink: impl FnMut(LineMatch<'_>) -> bool,
    ) -> Result<FileOutcome, SearchFileError> {
        if matcher.is_multiline() {
            let multi = build_multi_line_searcher(self.context);
            // A query that cannot match a line break is searched line by line, as `rg -U`
            // searches it.
            if multi.multi_line_with_matcher(matcher.inner()) {
                return self.search_multi_line(multi, matcher, file, control, sink);
            }
        }
        if let Some(outcome) = self.without_match(matcher, &mut file, control) {
            return Ok(outcome);
        }
        file.rewind().map_err(SearchFileError::Read)?;
        let mut matching_lines = 0u64;
        let mut sink = |m: LineMatch<'_>| {
            matching_lines += 1;
            sink(m)
        };
        let mut outcome = FileOutcome::default();
        let mut reader = GuardedReader::new(&mut file, control);
        let mut lines = LineSink::new(matcher, &mut sink, self.context);
        let result = self
            .searcher
            .search_reader(matcher.inner(), &mut reader, &mut lines);
        let longest = reader.longest.max(reader.run);
        let (stopped, failed) = (reader.stopped, reader.failed.take());
        outcome.binary = lines.binary;
        let reported = lines.last_line;
        match result {
            Ok(()) => lines.flush_all(),
            Err(_) if stopped => outcome.stopped = true,
            Err(_) if failed.is_some() => {
                self.refresh_if_grown(longest);
                return Err(SearchFileError::Read(
                    failed.unwrap_or_else(|| io::Error::other("read failed")),
                ));
            }
            Err(_) => {
                // The only other error is a line longer than the heap limit: search the file
                // again as a stream with bounded memory, when the stream can be exact.
                self.searcher = build_searcher(self.heap_limit, self.context);
                let Some(max_match_bytes) = matcher.max_match_bytes() else {
                    return Err(SearchFileError::LineTooLong);
                };
                if self.context.any() {
                    return Err(SearchFileError::LineTooLong);
                }
                file.rewind().map_err(SearchFileError::Read)?;
                // The sink already has the lines the searcher reported before the long line: the
                // stream, which starts over, passes on only the lines after them.
                let mut rest = |m: LineMatch<'_>| m.line_number <= reported || sink(m);
                let s = crate::stream::search(
                    &mut file,
                    matcher,
                    max_match_bytes,
                    self.stream_window,
                    control,
                    &mut rest,
                )
                .map_err(SearchFileError::Read)?;
                return Ok(FileOutcome {
                    binary: s.binary,
                    streamed: true,
                    stopped: s.stopped,
                    matching_lines,
                });
            }
        }
        self.refresh_if_grown(longest);
        outcome.matching_lines = matching_lines;
        Ok(outcome)
    }

    /// Searches the whole of `file` at once for matches that may span lines, with `searcher`
    /// (multi-line, for this file only, so that its buffer, as large as the file, is not kept).
    /// Each match is one hit at the line where it starts; the count is of matches, as `rg -c -U`
    /// counts them.
    fn search_multi_line<R: Read>(
        &mut self,
        mut searcher: Searcher,
        matcher: &QueryMatcher,
        mut file: R,
        control: &dyn SearchControl,
        mut sink: impl FnMut(LineMatch<'_>) -> bool,
    ) -> Result<FileOutcome, SearchFileError> {
        let mut matches = 0u64;
        let mut sink = |m: LineMatch<'_>| {
            matches += 1;
            sink(m)
        };
        let mut reader = GuardedReader::new(&mut file, control);
        let mut lines = LineSink::new(matcher, &mut sink, self.context);
        let result = searcher.search_reader(
            matcher.inner(),
            &mut reader,
            MultiLineSink { lines: &mut lines },
        );
        let binary = lines.binary;
        let mut outcome = FileOutcome {
            binary,
            ..FileOutcome::default()
        };
        match result {
            Ok(()) => lines.flush_all(),
            Err(_) if reader.stopped => outcome.stopped = true,
            Err(_) => {
                return Err(match reader.failed.take() {
                    Some(e) => SearchFileError::Read(e),
                    // The only other error: the file is larger than the multi-line heap limit.
                    None => SearchFileError::LineTooLong,
                });
            }
        }
        outcome.matching_lines = matches;
        Ok(outcome)
    }

    /// The outcome of searching `file` when the searcher without line numbers finds no match in
    /// it and nothing went wrong; `None` otherwise (a match, a stop, a failed read, an over-long
    /// line), and then the file must be searched with line numbers.
    fn without_match(
        &mut self,
        matcher: &QueryMatcher,
        file: &mut impl Read,
        control: &dyn SearchControl,
    ) -> Option<FileOutcome> {
        let mut reader = GuardedReader::new(file, control);
        let mut gate = MatchGate {
            found: false,
            binary: false,
        };
        let result = self
            .gate
            .search_reader(matcher.inner(), &mut reader, &mut gate);
        if reader.longest.max(reader.run) > INITIAL_BUFFER / 2 {
            self.gate = build_searcher_numbered(self.heap_limit, false, ContextConfig::default());
        }
        (result.is_ok() && !gate.found).then_some(FileOutcome {
            binary: gate.binary,
            ..FileOutcome::default()
        })
    }

    fn refresh_if_grown(&mut self, longest_line: u64) {
        if longest_line > INITIAL_BUFFER / 2 {
            self.searcher = build_searcher(self.heap_limit, self.context);
        }
    }
}

/// A reader that stops the search when told to, and measures the longest line it passed on.
struct GuardedReader<'a, R> {
    inner: &'a mut R,
    control: &'a dyn SearchControl,
    stopped: bool,
    failed: Option<io::Error>,
    /// Bytes since the last line terminator, and the longest line seen so far.
    run: u64,
    longest: u64,
}

impl<'a, R> GuardedReader<'a, R> {
    fn new(inner: &'a mut R, control: &'a dyn SearchControl) -> Self {
        GuardedReader {
            inner,
            control,
            stopped: false,
            failed: None,
            run: 0,
            longest: 0,
        }
    }
}

impl<R: Read> Read for GuardedReader<'_, R> {
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

/// A matching line waiting for its `after` lines.
struct Pending {
    line_number: u64,
    line: Vec<u8>,
    start: usize,
    end: usize,
    before: Vec<String>,
    after: Vec<String>,
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
    matcher: &'a QueryMatcher,
    sink: &'a mut F,
    binary: bool,
    /// The last line number passed to `sink`.
    last_line: u64,
    context: ContextConfig,
    /// The last `context.before` lines the searcher reported (matching or context), numbered.
    recent: VecDeque<(u64, String)>,
    /// Matching lines still waiting for their `after` lines, in line order.
    pending: VecDeque<Pending>,
    /// The sink returned `false`.
    said_stop: bool,
}

impl<'a, F: FnMut(LineMatch<'_>) -> bool> LineSink<'a, F> {
    fn new(matcher: &'a QueryMatcher, sink: &'a mut F, context: ContextConfig) -> Self {
        LineSink {
            matcher,
            sink,
            binary: false,
            last_line: 0,
            context,
            recent: VecDeque::new(),
            pending: VecDeque::new(),
            said_stop: false,
        }
    }

    /// Takes one line the searcher reported, matching or context, in line order. Returns whether
    /// to go on.
    fn line(&mut self, line_number: u64, line: &[u8], matching: bool) -> bool {
        if !matching {
            return self.line_with(line_number, line, &[]);
        }
        // The searcher reported this line as matching; find cannot disagree, but if it did,
        // the line is still a hit and its column is the line start.
        let first = self.matcher.find(line).unwrap_or((0, 0));
        self.line_with(line_number, line, &[first])
    }

    /// Takes one line with the byte ranges of the matches that start on it (each one hit; an
    /// end past the line is cut to it), or none for a line that is only reported. Returns
    /// whether to go on.
    fn line_with(&mut self, line_number: u64, line: &[u8], starts: &[(usize, usize)]) -> bool {
        let ctx = self.context;
        if ctx.after > 0 {
            // Every line within `after` of a pending match is reported, so a line beyond that
            // means the pending match has all the lines it will get.
            let cut = (!self.pending.is_empty()).then(|| context_line(line, ctx.line_bytes));
            for p in &mut self.pending {
                if line_number <= p.line_number + ctx.after as u64 {
                    p.after.push(cut.clone().unwrap_or_default());
                }
            }
            while let Some(p) = self.pending.front() {
                let done =
                    p.after.len() >= ctx.after || line_number > p.line_number + ctx.after as u64;
                if !done || !self.flush_front() {
                    break;
                }
            }
            if self.said_stop {
                return false;
            }
        }
        for &(start, end) in starts {
            let end = end.min(line.len());
            let low = line_number.saturating_sub(ctx.before as u64);
            let before: Vec<String> = self
                .recent
                .iter()
                .filter(|(n, _)| *n >= low && *n < line_number)
                .map(|(_, s)| s.clone())
                .collect();
            if ctx.after > 0 {
                self.pending.push_back(Pending {
                    line_number,
                    line: line.to_vec(),
                    start,
                    end,
                    before,
                    after: Vec::new(),
                });
            } else {
                self.last_line = line_number;
                let go_on = (self.sink)(LineMatch {
                    line_number,
                    line,
                    start,
                    end,
                    column: start as u64 + 1,
                    partial: false,
                    before: &before,
                    after: &[],
                });
                if !go_on {
                    self.said_stop = true;
                    return false;
                }
            }
        }
        if ctx.before > 0 {
            self.recent
                .push_back((line_number, context_line(line, ctx.line_bytes)));
            while self.recent.len() > ctx.before {
                self.recent.pop_front();
            }
        }
        true
    }

    /// Passes the first pending match to the sink. Returns whether to go on.
    fn flush_front(&mut self) -> bool {
        let Some(p) = self.pending.pop_front() else {
            return true;
        };
        self.last_line = p.line_number;
        let go_on = (self.sink)(LineMatch {
            line_number: p.line_number,
            line: &p.line,
            start: p.start,
            end: p.end,
            column: p.start as u64 + 1,
            partial: false,
            before: &p.before,
            after: &p.after,
        });
        if !go_on {
            self.said_stop = true;
            self.pending.clear();
        }
        go_on
    }

    /// At the end of the file (or where a NUL ended it): the pending matches get the lines they
    /// have.
    fn flush_all(&mut self) {
        while !self.pending.is_empty() && self.flush_front() {}
    }
}

/// A context line as hits carry it: no terminator, lossy UTF-8, at most `cap` bytes.
fn context_line(line: &[u8], cap: usize) -> String {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    index_guard::truncate_str(&text, cap).0.to_owned()
}

impl<F: FnMut(LineMatch<'_>) -> bool> Sink for LineSink<'_, F> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let first = mat.line_number().unwrap_or(1);
        for (i, line) in mat.lines().enumerate() {
            if !self.line(first + i as u64, line, true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        let first = context.line_number().unwrap_or(1);
        for (i, line) in context.bytes().split_inclusive(|&b| b == b'\n').enumerate() {
            if !self.line(first + i as u64, line, false) {
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

/// The multi-line searcher's sink: a block of lines holding one or more matches is split into its
/// matches (found as `rg` finds them to count and print them: from the block's start, seeing one
/// byte past its end for look-ahead) and handed to a [`LineSink`] line by line, each match a hit
/// at the line where it starts.
struct MultiLineSink<'s, 'a, F> {
    lines: &'s mut LineSink<'a, F>,
}

/// How far past a block a match's look-ahead (`$`, `\b`) may see, as ripgrep's printer allows.
const MAX_LOOK_AHEAD: usize = 1;

impl<F: FnMut(LineMatch<'_>) -> bool> Sink for MultiLineSink<'_, '_, F> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let buffer = mat.buffer();
        let range = mat.bytes_range_in_buffer();
        let visible = &buffer[..(range.end + MAX_LOOK_AHEAD).min(buffer.len())];
        let mut found: Vec<(usize, usize)> = Vec::new();
        self.lines
            .matcher
            .inner()
            .find_iter_at(visible, range.start, |m| {
                if m.start() >= range.end {
                    return false;
                }
                found.push((m.start(), m.end()));
                true
            })
            .map_err(|e| io::Error::other(e.to_string()))?;
        let first = mat.line_number().unwrap_or(1);
        let mut next = found.iter().peekable();
        let mut line_start = range.start;
        for (i, line) in mat.lines().enumerate() {
            let line_end = line_start + line.len();
            let mut starts: Vec<(usize, usize)> = Vec::new();
            while let Some(&&(s, e)) = next.peek() {
                if s >= line_end {
                    break;
                }
                starts.push((s - line_start, e - line_start));
                next.next();
            }
            if !self.lines.line_with(first + i as u64, line, &starts) {
                return Ok(false);
            }
            line_start = line_end;
        }
        Ok(true)
    }

    fn context(
        &mut self,
        searcher: &Searcher,
        context: &SinkContext<'_>,
    ) -> Result<bool, io::Error> {
        self.lines.context(searcher, context)
    }

    fn binary_data(&mut self, searcher: &Searcher, offset: u64) -> Result<bool, io::Error> {
        self.lines.binary_data(searcher, offset)
    }
}

#[cfg(test)]
mod stream_tests;

#[cfg(test)]
mod tests {
    use std::io::{Seek, Write};

    use super::{ContextConfig, FileSearcher, LineSink, SearchFileError, build_searcher};
    use crate::{NeverStop, query_matcher};
    use std::collections::VecDeque;

    fn file_of(text: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(text).unwrap();
        f.rewind().unwrap();
        f
    }

    /// (line, column, before, after) of every hit, and the outcome's count of matching lines.
    type Found = (u64, u64, Vec<String>, Vec<String>);

    fn search(
        searcher: &mut FileSearcher,
        text: &str,
        query: &str,
        regex: bool,
        stop_after: usize,
    ) -> (Vec<Found>, u64) {
        let m = query_matcher(query, regex, false).unwrap();
        let mut found = Vec::new();
        let outcome = searcher
            .search(&m, file_of(text.as_bytes()), &NeverStop, |l| {
                found.push((l.line_number, l.column, l.before.to_vec(), l.after.to_vec()));
                found.len() < stop_after
            })
            .unwrap();
        (found, outcome.matching_lines)
    }

    fn check(
        text: &str,
        query: &str,
        context: (usize, usize),
        expected: &[(u64, &[&str], &[&str])],
    ) {
        let mut searcher = FileSearcher::default().with_context(ContextConfig {
            before: context.0,
            after: context.1,
            line_bytes: 6,
        });
        let (found, count) = search(&mut searcher, text, query, true, usize::MAX);
        let got: Vec<(u64, Vec<String>, Vec<String>)> =
            found.into_iter().map(|(l, _, b, a)| (l, b, a)).collect();
        let want: Vec<(u64, Vec<String>, Vec<String>)> = expected
            .iter()
            .map(|(l, b, a)| {
                let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
                (*l, owned(b), owned(a))
            })
            .collect();
        assert_eq!(got, want, "{query:?} with context {context:?}");
        assert_eq!(count, expected.len() as u64);
    }

    #[test]
    fn each_matching_line_carries_its_own_neighbours() {
        let text = "a1\nb2 x\nc3\nd4 x\r\ne5\nf6\ng7 x\n";
        check(
            text,
            "x",
            (0, 0),
            &[(2, &[], &[]), (4, &[], &[]), (7, &[], &[])],
        );
        check(
            text,
            "x",
            (1, 1),
            &[
                (2, &["a1"], &["c3"]),
                (4, &["c3"], &["e5"]),
                (7, &["f6"], &[]),
            ],
        );
        // Neighbourhoods overlap, and a neighbour may itself match.
        check(
            text,
            "x",
            (2, 2),
            &[
                (2, &["a1"], &["c3", "d4 x"]),
                (4, &["b2 x", "c3"], &["e5", "f6"]),
                (7, &["e5", "f6"], &[]),
            ],
        );
        check(text, "^a", (0, 3), &[(1, &[], &["b2 x", "c3", "d4 x"])]);
        check(
            text,
            "^g",
            (9, 0),
            &[(7, &["a1", "b2 x", "c3", "d4 x", "e5", "f6"], &[])],
        );
    }

    #[test]
    fn context_lines_are_cut_on_a_character_boundary() {
        // 6 bytes: "café" is 5, "cafés!" is 7, cut to "cafés".
        check(
            "cafés!\nx\nnaïveté\n",
            "x",
            (1, 1),
            &[(2, &["cafés"], &["naïve"])],
        );
    }

    #[test]
    fn a_sink_that_stops_stops_the_count_and_the_pending_lines() {
        let mut searcher = FileSearcher::default().with_context(ContextConfig {
            before: 0,
            after: 1,
            line_bytes: 100,
        });
        let (found, count) = search(&mut searcher, "x\nx\nx\ny\n", "x", false, 2);
        assert_eq!(found.len(), 2);
        assert_eq!(count, 2);
        assert_eq!(found[1].3, ["x"]);
    }

    #[test]
    fn count_counts_lines_not_matches() {
        let mut searcher = FileSearcher::default();
        let (found, count) = search(&mut searcher, "x x x\nno\nxx\n", "x", false, usize::MAX);
        assert_eq!(count, 2);
        assert_eq!(found.iter().map(|f| f.1).collect::<Vec<_>>(), [1, 1]);
    }

    #[test]
    fn a_line_over_the_heap_limit_streams_a_bounded_regex_and_refuses_the_others() {
        let mut long = "a".repeat(5000);
        long.push_str(" foo42 bar\nfoo7\n");
        // A bounded regex takes the stream, and `\b` sees the byte after its match.
        let mut small = FileSearcher::new(1024, 256);
        let m = query_matcher(r"\bfoo[0-9]{1,2}\b", true, false).unwrap();
        assert_eq!(m.max_match_bytes(), Some(5));
        let mut lines = Vec::new();
        let outcome = small
            .search(&m, file_of(long.as_bytes()), &NeverStop, |l| {
                lines.push((l.line_number, l.column));
                true
            })
            .unwrap();
        assert!(outcome.streamed);
        assert_eq!(lines, [(1, 5002), (2, 1)]);
        // An unbounded regex, or any query with context, cannot be streamed.
        let unbounded = query_matcher(r"foo[0-9]+", true, false).unwrap();
        assert_eq!(unbounded.max_match_bytes(), None);
        let err = small
            .search(&unbounded, file_of(long.as_bytes()), &NeverStop, |_| true)
            .unwrap_err();
        assert!(matches!(err, SearchFileError::LineTooLong));
        let mut with_context = FileSearcher::new(1024, 256).with_context(ContextConfig {
            before: 1,
            after: 0,
            line_bytes: 10,
        });
        let fixed = query_matcher("foo", false, false).unwrap();
        let err = with_context
            .search(&fixed, file_of(long.as_bytes()), &NeverStop, |_| true)
            .unwrap_err();
        assert!(matches!(err, SearchFileError::LineTooLong));
    }

    /// Multi-line search: `(text, regex, context after, expected (line, column, after) of each
    /// hit, expected count)`, the count being of matches when the query can match a line break
    /// and of lines otherwise, as `rg -c -U` counts.
    #[test]
    fn multi_line_matches_are_hits_at_the_line_where_they_start() {
        type Case<'a> = (
            &'a str,
            &'a str,
            usize,
            &'a [(u64, u64, &'a [&'a str])],
            u64,
        );
        let cases: &[Case<'_>] = &[
            ("a\nb a\nb\n", r"a\nb", 0, &[(1, 1, &[]), (2, 3, &[])], 2),
            ("xa\nbyy\n", r"a\nb", 1, &[(1, 2, &["byy"])], 1),
            // Two matches starting on one line are two hits.
            ("ab\nab\n", r"b\n?", 0, &[(1, 2, &[]), (2, 2, &[])], 2),
            ("a a\nb\n", r"a\s", 0, &[(1, 1, &[]), (1, 3, &[])], 2),
            // A query that cannot match a line break is searched line by line: lines, not
            // matches.
            ("x x\nno\nx\n", "x", 0, &[(1, 1, &[]), (3, 1, &[])], 2),
            // `$` before a line break at the block's end, and `.` never crosses a line.
            ("fn a;\n}\n", r";$\n\}", 0, &[(1, 5, &[])], 1),
            ("a\nb\n", "a.b", 0, &[], 0),
            // CRLF lines: the `\r` belongs to the match.
            ("a\r\nb\r\n", r"a\r\nb", 1, &[(1, 1, &["b"])], 1),
        ];
        for &(text, query, after, expected, count) in cases {
            let mut searcher = FileSearcher::default().with_context(ContextConfig {
                before: 0,
                after,
                line_bytes: 100,
            });
            let mut request =
                index_contract::SearchRequest::new(query, index_contract::SearchMode::Literal);
            request.regex = true;
            request.multiline = true;
            let m = crate::request_matcher(&request).unwrap();
            let mut hits = Vec::new();
            let outcome = searcher
                .search(&m, file_of(text.as_bytes()), &NeverStop, |l| {
                    hits.push((l.line_number, l.column, l.after.to_vec()));
                    true
                })
                .unwrap();
            let want: Vec<(u64, u64, Vec<String>)> = expected
                .iter()
                .map(|(l, c, a)| (*l, *c, a.iter().map(|s| s.to_string()).collect()))
                .collect();
            assert_eq!(hits, want, "{query:?} in {text:?}");
            assert_eq!(outcome.matching_lines, count, "{query:?} in {text:?}");
        }
    }

    #[test]
    fn a_file_over_the_multi_line_heap_limit_is_refused_not_searched_in_part() {
        let mut big = "a\n".repeat(super::MULTI_LINE_HEAP_LIMIT / 2 + 1);
        big.insert_str(0, "x\ny\n");
        let mut request =
            index_contract::SearchRequest::new("x\ny", index_contract::SearchMode::Literal);
        request.multiline = true;
        let m = crate::request_matcher(&request).unwrap();
        let err = FileSearcher::default()
            .search(&m, file_of(big.as_bytes()), &NeverStop, |_| true)
            .unwrap_err();
        assert!(matches!(err, SearchFileError::LineTooLong));
    }

    /// (line, column) of each hit, and whether the file was binary.
    type Numbered = (Vec<(u64, u64)>, bool);

    /// What a fresh line-numbering searcher reports for `text`: the answer before the search
    /// learned to skip line numbers in files without a match.
    fn numbered(text: &[u8], query: &str) -> Numbered {
        let m = query_matcher(query, false, false).unwrap();
        let mut hits = Vec::new();
        let mut sink = |l: crate::LineMatch<'_>| {
            hits.push((l.line_number, l.column));
            true
        };
        let mut lines = LineSink {
            matcher: &m,
            sink: &mut sink,
            binary: false,
            last_line: 0,
            context: ContextConfig::default(),
            recent: VecDeque::new(),
            pending: VecDeque::new(),
            said_stop: false,
        };
        build_searcher(crate::DEFAULT_HEAP_LIMIT, ContextConfig::default())
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
            let m = query_matcher(query, false, false).unwrap();
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
