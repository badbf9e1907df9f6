//! Verifying candidates exactly, with the shared ripgrep profile, so hits equal ripgrep's.

use index_contract::OutputMode;
use search_profile::{ContextConfig, FileSearcher, QueryMatcher, RootDir, SearchControl};

use search_profile::rank::MatchShape;

/// The longest snippet (and context line) a backend hit carries; the facade cuts it further to its
/// own cap.
pub(crate) const SNIPPET_WINDOW: usize = 16 * 1024;

/// A file's first match: line, 1-based byte column, the line (a window of it if long), its shape,
/// and what the request asked for besides: the file's count of matching lines, context lines.
pub(crate) struct FirstMatch {
    pub(crate) line: u64,
    pub(crate) column: u64,
    pub(crate) snippet: String,
    pub(crate) shape: MatchShape,
    pub(crate) count: Option<u64>,
    pub(crate) before: Vec<String>,
    pub(crate) after: Vec<String>,
}

/// What verifying one candidate found.
pub(crate) enum Verified {
    /// Its first match.
    Match(FirstMatch),
    /// No match (or binary before one; or, counting, a NUL anywhere or a deadline or cancel).
    NoMatch,
    /// It could not be opened beneath the root without following a symlink, or read, or searched
    /// in bounded memory (a line over the heap limit that this query cannot stream).
    Unreadable,
}

/// A searcher for verification: the profile's, with snippet windows of [`SNIPPET_WINDOW`] and
/// `context` lines around each match.
pub(crate) fn searcher(context: ContextConfig) -> FileSearcher {
    FileSearcher::new(search_profile::DEFAULT_HEAP_LIMIT, SNIPPET_WINDOW).with_context(context)
}

/// Searches the file at `rel` for its first match, exactly as the literal search would; with
/// `OutputMode::Count`, to its end, counting matching lines as `rg -c` does.
pub(crate) fn first_match(
    searcher: &mut FileSearcher,
    matcher: &QueryMatcher,
    dir: &RootDir,
    rel: &str,
    output: OutputMode,
    control: &dyn SearchControl,
) -> Verified {
    let Ok(file) = dir.open_file(rel) else {
        return Verified::Unreadable;
    };
    let mut found = None;
    let result = searcher.search(matcher, file, control, |m| {
        if found.is_none() {
            let body = m.line.strip_suffix(b"\n").unwrap_or(m.line);
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            let lo = m.start.saturating_sub(SNIPPET_WINDOW / 4);
            let hi = (lo + SNIPPET_WINDOW).min(body.len());
            found = Some(FirstMatch {
                line: m.line_number,
                column: m.column,
                snippet: String::from_utf8_lossy(&body[lo.min(hi)..hi]).into_owned(),
                shape: MatchShape::of(body, m.start, m.end),
                count: None,
                before: m.before.to_vec(),
                after: m.after.to_vec(),
            });
        }
        output == OutputMode::Count
    });
    match (result, found) {
        (Err(_), _) => Verified::Unreadable,
        (Ok(outcome), Some(mut m)) if output == OutputMode::Count => {
            // A count cut short would be wrong: no hit, and the answer is incomplete. ripgrep's
            // `-c` drops a file whose search met a NUL, even after matches.
            if outcome.stopped || outcome.binary {
                return Verified::NoMatch;
            }
            m.count = Some(outcome.matching_lines);
            Verified::Match(m)
        }
        (Ok(_), Some(m)) => Verified::Match(m),
        (Ok(_), None) => Verified::NoMatch,
    }
}
