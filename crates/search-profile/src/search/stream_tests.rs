//! The bounded stream (`stream.rs`) as the searcher takes it for lines over the heap limit: its
//! hits equal the default searcher's on the same text, cut to windows.

use std::io::{Seek, Write};
use std::ops::Range;

use super::{FileOutcome, FileSearcher};
use crate::stream::CHUNK;
use crate::{NeverStop, QueryMatcher, matcher, query_matcher};

/// Small enough that any line over 1 KiB takes the stream.
const TINY_HEAP: usize = 1024;
/// Snippet bytes on each side of a match.
const WINDOW: usize = 256;

/// One reported line: where its window lies in the file, so a failure prints offsets rather
/// than megabytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hit {
    line: u64,
    column: u64,
    partial: bool,
    window: Range<usize>,
}

fn file_of(text: &[u8]) -> std::fs::File {
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(text).unwrap();
    f.rewind().unwrap();
    f
}

fn line_starts(text: &[u8]) -> Vec<usize> {
    std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', text).map(|i| i + 1))
        .collect()
}

/// Searches `text`, mapping each reported line back to absolute offsets and checking that
/// the bytes reported are the file's bytes there.
fn search(
    searcher: &mut FileSearcher,
    text: &[u8],
    m: &QueryMatcher,
) -> (Vec<(Hit, usize)>, FileOutcome) {
    let starts = line_starts(text);
    let mut hits = Vec::new();
    let outcome = searcher
        .search(m, file_of(text), &NeverStop, |found| {
            let line_start = starts[found.line_number as usize - 1];
            let at = line_start + found.column as usize - 1;
            let window_start = at - found.start;
            let window = window_start..window_start + found.line.len();
            assert_eq!(
                found.line,
                &text[window.clone()],
                "the bytes reported for line {} are not the file's",
                found.line_number
            );
            hits.push((
                Hit {
                    line: found.line_number,
                    column: found.column,
                    partial: found.partial,
                    window,
                },
                found.end - found.start,
            ));
            true
        })
        .unwrap();
    (hits, outcome)
}

/// What the stream must report: the default searcher's whole lines, cut to `WINDOW` bytes on
/// each side of the match, without the terminator; `partial` when the cut lost any byte.
fn reference(text: &[u8], m: &QueryMatcher) -> Vec<Hit> {
    let (hits, outcome) = search(&mut FileSearcher::default(), text, m);
    assert!(
        !outcome.streamed && !outcome.binary,
        "reference: {outcome:?}"
    );
    hits.into_iter()
        .map(|(h, len)| {
            let line_start = h.window.start;
            let body_end = if text[..h.window.end].ends_with(b"\n") {
                h.window.end - 1
            } else {
                h.window.end
            };
            let at = line_start + h.column as usize - 1;
            let window = line_start.max(at.saturating_sub(WINDOW))..body_end.min(at + len + WINDOW);
            Hit {
                partial: window != (line_start..body_end),
                window,
                ..h
            }
        })
        .collect()
}

/// Streams `text` with a tiny heap limit and checks (line, column, partial) of each hit
/// against `expected`, and every hit against the default searcher's on the text before any
/// NUL (which must start a line).
fn check(text: &[u8], query: &str, expected: &[(u64, u64, bool)]) -> FileOutcome {
    let m = matcher(query, false).unwrap();
    let (hits, outcome) = search(&mut FileSearcher::new(TINY_HEAP, WINDOW), text, &m);
    assert!(outcome.streamed, "the stream path was not taken");
    // Lines the searcher reported before it met the long line carry their terminator, which
    // every consumer strips; stream windows never include it.
    let hits: Vec<Hit> = hits
        .into_iter()
        .map(|(mut h, _)| {
            if text[..h.window.end].ends_with(b"\n") {
                h.window.end -= 1;
            }
            h
        })
        .collect();
    let got: Vec<(u64, u64, bool)> = hits.iter().map(|h| (h.line, h.column, h.partial)).collect();
    assert_eq!(got, expected, "(line, column, partial)");
    let before_nul = match memchr::memchr(0, text) {
        Some(nul) => {
            assert!(
                nul == 0 || text[nul - 1] == b'\n',
                "test text: a NUL must start a line"
            );
            &text[..nul]
        }
        None => text,
    };
    assert_eq!(hits, reference(before_nul, &m), "windows");
    outcome
}

fn repeat(byte: u8, n: usize) -> Vec<u8> {
    vec![byte; n]
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn a_match_straddling_the_chunk_edge_is_found_once_with_its_column() {
    // "needle" starting 1..=5 bytes before the 1 MiB edge: it lies across the first two reads.
    for before_edge in 1..=5 {
        let start = CHUNK - before_edge;
        let text = cat(&[
            &repeat(b'a', start),
            b"needle",
            &repeat(b'b', 100),
            b"\nsecond needle\n",
        ]);
        check(
            &text,
            "needle",
            &[(1, start as u64 + 1, true), (2, 8, false)],
        );
    }
}

#[test]
fn matches_in_the_overlap_are_found_once() {
    // Every start from just before the overlap to just past the edge: a match in the overlap
    // is searched in the next round only, and never twice.
    for start in CHUNK - 30..CHUNK + 3 {
        let text = cat(&[&repeat(b'a', start), b"needle", &repeat(b'b', 2000), b"\n"]);
        check(&text, "needle", &[(1, start as u64 + 1, true)]);
    }
}

#[test]
fn a_match_starting_exactly_at_the_overlap_boundary_is_reported_as_partial() {
    // The match starts where the first round stops searching (edge minus the overlap), on a
    // line that began a megabyte earlier: its window cannot be the whole line.
    let overlap = 4 * "needle".len();
    let start = CHUNK - overlap;
    let text = cat(&[&repeat(b'a', start), b"needle", &repeat(b'b', 100), b"\n"]);
    check(&text, "needle", &[(1, start as u64 + 1, true)]);
}

#[test]
fn a_window_near_the_chunk_edge_is_not_cut_at_the_end_of_the_read() {
    // A line starts 99 bytes before the edge and goes on past it: its window must run
    // `WINDOW` bytes past the match, not stop where the first read stopped.
    let text = cat(&[
        &repeat(b'a', CHUNK - 100),
        b"\nneedle",
        &repeat(b'b', 1000),
        b"\n",
    ]);
    check(&text, "needle", &[(2, 1, true)]);
}

#[test]
fn several_matches_on_one_line_give_one_hit_for_the_first() {
    let mut long = repeat(b'a', CHUNK + 2000);
    for at in [10, CHUNK - 3, CHUNK + 500] {
        long[at..at + 6].copy_from_slice(b"needle");
    }
    let text = cat(&[
        &long,
        b"\nneedle needle needle\n",
        &repeat(b'c', 3000),
        b"needleneedle",
        &repeat(b'c', 3000),
        b"\nno match\nneedle\n",
    ]);
    check(
        &text,
        "needle",
        &[(1, 11, true), (2, 1, false), (3, 3001, true), (5, 1, false)],
    );
}

#[test]
fn hits_before_an_over_long_line_are_reported_once() {
    // The searcher reports line 1 before it meets the over-long line 2 and falls back to the
    // stream, which starts again from the top: line 1 must not be reported twice.
    let text = cat(&[b"needle first\n", &repeat(b'a', 5000), b"needle\n"]);
    check(&text, "needle", &[(1, 1, false), (2, 5001, true)]);
}

#[test]
fn a_nul_ends_the_stream_and_keeps_the_hits_before_it() {
    // Hits in both reads before the NUL are kept; nothing after it is searched.
    let text = cat(&[
        &repeat(b'a', 5000),
        b"needle\nneedle second\n",
        &repeat(b'z', CHUNK),
        b"\nneedle past the edge\n\0needle after the nul\nneedle\n",
    ]);
    let outcome = check(
        &text,
        "needle",
        &[(1, 5001, true), (2, 1, false), (4, 1, false)],
    );
    assert!(outcome.binary);
}

#[test]
fn a_nul_at_the_start_of_a_read_keeps_the_match_in_the_overlap_before_it() {
    // The match lies in the overlap the first round leaves for the next; the next read starts
    // with a NUL. The match precedes the NUL, so it is a hit.
    let text = cat(&[
        &repeat(b'a', CHUNK - 20),
        b"needle",
        &repeat(b'b', 13),
        b"\n\0needle\n",
    ]);
    assert_eq!(text[CHUNK], 0);
    let outcome = check(&text, "needle", &[(1, CHUNK as u64 - 19, true)]);
    assert!(outcome.binary);
}

#[test]
fn a_match_just_before_a_nul_near_the_end_of_a_read_is_kept() {
    // The NUL lies within the overlap at the end of the read, after a match there: the match
    // precedes the NUL, so it is a hit.
    let text = cat(&[&repeat(b'a', 2000), b"\nneedle\n\0\n"]);
    let outcome = check(&text, "needle", &[(2, 1, false)]);
    assert!(outcome.binary);
}

/// A deterministic xorshift, so a failure reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// About 2.5 MiB of lines up to 3000 bytes (over the tiny heap limit, under the default
/// one), CRLF and LF, with "needle" in assorted cases scattered, and "Needle" placed near
/// both chunk edges. The first line is long, so the stream is taken before any hit is
/// reported (`hits_before_an_over_long_line_are_reported_once` covers the other case).
fn generated(seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let words: [&[u8]; 8] = [
        b"needle",
        b"NEEDLE",
        b"neEdle",
        b"need",
        b"le",
        b"hay",
        b"stack",
        "caf\u{e9}".as_bytes(),
    ];
    let mut text = repeat(b'h', 2000);
    while text.len() < 5 * CHUNK / 2 {
        let target = match rng.below(4) {
            0 => rng.below(3000),
            _ => rng.below(80),
        };
        let start = text.len();
        while text.len() - start < target {
            text.extend_from_slice(words[rng.below(words.len())]);
            text.push(if rng.below(3) == 0 { b'x' } else { b' ' });
        }
        text.extend_from_slice(if rng.below(5) == 0 { b"\r\n" } else { b"\n" });
    }
    for edge in [CHUNK, 2 * CHUNK] {
        let at = edge - 40 + rng.below(50);
        text[at..at + 6].copy_from_slice(b"Needle");
    }
    text
}

#[test]
fn streamed_hits_equal_the_default_searchers_on_the_same_text() {
    let mut compared = 0;
    for seed in 0..6 {
        let text = generated(seed);
        for (query, regex, case_insensitive) in [
            ("needle", false, false),
            ("needle", false, true),
            ("Needle", false, false),
            ("e", false, false),
            ("café", false, true),
            ("hay stack", false, false),
            // Bounded regexes, with assertions that look past the match at a chunk edge.
            (r"\bne{1,2}dle\b", true, false),
            (r"[Hh]ay\s{1,3}stack|caf[eé]", true, true),
            (r"^need", true, false),
            (r"le$", true, false),
            (r"\bNeedle", true, false),
        ] {
            let m = query_matcher(query, regex, case_insensitive).unwrap();
            assert!(m.max_match_bytes().is_some(), "{query} is bounded");
            let (hits, outcome) = search(&mut FileSearcher::new(TINY_HEAP, WINDOW), &text, &m);
            assert!(outcome.streamed && !outcome.binary);
            let hits: Vec<Hit> = hits.into_iter().map(|(h, _)| h).collect();
            let want = reference(&text, &m);
            if let Some(i) = (0..hits.len().max(want.len())).find(|&i| hits.get(i) != want.get(i)) {
                panic!(
                    "seed {seed}, query {query:?} (case-insensitive: {case_insensitive}): hit {i} \
                     is {:?}, the default searcher's is {:?}",
                    hits.get(i),
                    want.get(i)
                );
            }
            compared += hits.len();
        }
    }
    assert!(compared > 10_000, "only {compared} hits compared");
}
