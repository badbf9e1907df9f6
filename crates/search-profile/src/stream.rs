//! The bounded-memory path for files with a line longer than the heap limit.
//!
//! `grep-searcher` needs a whole line in memory. A file with one 1 GiB line would cost 1 GiB, so
//! past the heap limit the file is searched again here: in fixed-size chunks with an overlap long
//! enough for any match, counting lines as it goes. Memory is one chunk plus the overlap and the
//! snippet windows.
//!
//! The overlap needs a bound on the length of a match: a fixed string has one, and so does a
//! regex without unbounded repetition (plus one character for a look-ahead assertion such as
//! `\b`). A regex without a bound is not searched here: the file fails with
//! `SearchFileError::LineTooLong`, where ripgrep, which has no heap limit, would hold the whole
//! line in memory. Context lines are not produced on this path either, for the same reason.
//!
//! Like ripgrep's quit-on-binary rule, a NUL byte ends the search of the file (hits found before
//! it are kept). Unlike ripgrep, a UTF-16 byte-order mark is not transcoded on
//! this path.

use std::io::{self, Read};

use grep_matcher::Matcher;

use crate::control::SearchControl;
use crate::matcher::{LineMatch, QueryMatcher};

/// Bytes read at a time.
pub(crate) const CHUNK: usize = 1 << 20;

pub(crate) struct StreamOutcome {
    pub(crate) binary: bool,
    pub(crate) stopped: bool,
}

pub(crate) fn search(
    file: &mut impl Read,
    matcher: &QueryMatcher,
    max_match_bytes: usize,
    window: usize,
    control: &dyn SearchControl,
    sink: &mut dyn FnMut(LineMatch<'_>) -> bool,
) -> io::Result<StreamOutcome> {
    // A regex may look one character past its match (`\b`, `$`): keep that character in the
    // buffer too, so an assertion at the end of a match sees the file's next byte, not the end
    // of the buffer.
    // Bytes kept before the next search position must cover a look-behind assertion too.
    let window = window.max(4);
    let overlap = max_match_bytes + if matcher.is_regex() { 4 } else { 0 };
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + overlap + 2 * window);
    // Line number at the counting position, and where in buf newline counting resumes.
    let mut line_no: u64 = 1;
    let mut counted = 0usize;
    // Absolute offset of buf[0], of the current line's start, and the last line with a hit.
    let mut base: u64 = 0;
    let mut line_start: u64 = 0;
    let mut last_hit_line = 0u64;
    let mut binary = false;
    let mut search_from = 0usize;
    loop {
        if control.should_stop() {
            return Ok(StreamOutcome {
                binary,
                stopped: true,
            });
        }
        let old = buf.len();
        buf.resize(old + CHUNK, 0);
        let n = crate::open::read_full(file, &mut buf[old..])?;
        buf.truncate(old + n);
        let eof = n == 0;
        // Search matches that start before `limit`: with the overlap and a snippet window kept
        // beyond it, any match starting there lies wholly in the buffer, and so does its window.
        let mut limit = if eof {
            buf.len()
        } else {
            buf.len().saturating_sub(overlap + window)
        };
        if let Some(nul) = memchr::memchr(0, &buf[old..]) {
            // The search ends at the NUL: everything before it is searched, even what would
            // otherwise wait for the next read.
            binary = true;
            limit = old + nul;
        }
        let mut at = search_from;
        while at < limit {
            let Some(m) = matcher
                .inner()
                .find_at(&buf, at)
                .ok()
                .flatten()
                .filter(|m| m.start() < limit)
            else {
                break;
            };
            // Advance the line count to the match.
            for i in memchr::memchr_iter(b'\n', &buf[counted..m.start()]) {
                line_no += 1;
                line_start = base + (counted + i) as u64 + 1;
            }
            counted = m.start();
            if line_no != last_hit_line {
                last_hit_line = line_no;
                let ls = usize::try_from(line_start.saturating_sub(base)).unwrap_or(0);
                let lo = ls.max(m.start().saturating_sub(window));
                let le = memchr::memchr(b'\n', &buf[m.start()..])
                    .map_or(buf.len(), |i| m.start() + i)
                    .min(m.end().max(m.start()) + window);
                let go_on = sink(LineMatch {
                    line_number: line_no,
                    line: &buf[lo..le],
                    start: m.start() - lo,
                    end: m.end() - lo,
                    column: base + m.start() as u64 - line_start + 1,
                    // A slice of the line that is not the whole line is a cut snippet; so is any
                    // window of a line whose start was already dropped from the buffer.
                    partial: line_start < base || lo != ls || le < buf.len() && buf[le] != b'\n',
                    before: &[],
                    after: &[],
                });
                if !go_on {
                    return Ok(StreamOutcome {
                        binary,
                        stopped: false,
                    });
                }
            }
            at = m.end().max(m.start() + 1);
        }
        if binary || eof {
            break;
        }
        // Count the rest of the searched region, keep the overlap (and some context for
        // snippets), drop the rest.
        for i in memchr::memchr_iter(b'\n', &buf[counted..limit]) {
            line_no += 1;
            line_start = base + (counted + i) as u64 + 1;
        }
        counted = limit;
        let keep_from = limit.saturating_sub(window);
        buf.drain(..keep_from);
        base += keep_from as u64;
        counted -= keep_from;
        search_from = at.max(limit) - keep_from;
    }
    Ok(StreamOutcome {
        binary,
        stopped: false,
    })
}
