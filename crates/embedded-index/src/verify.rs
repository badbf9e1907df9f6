//! Verifying candidates exactly, with the shared ripgrep profile, so hits equal ripgrep's.

use search_profile::{FileSearcher, LiteralMatcher, RootDir, SearchControl};

use crate::rank::MatchShape;

/// The longest snippet a backend hit carries; the facade cuts it further to its own cap.
pub(crate) const SNIPPET_WINDOW: usize = 16 * 1024;

/// A file's first match: line, 1-based byte column, the line (a window of it if long), its shape.
pub(crate) struct FirstMatch {
    pub(crate) line: u64,
    pub(crate) column: u64,
    pub(crate) snippet: String,
    pub(crate) shape: MatchShape,
}

/// What verifying one candidate found.
pub(crate) enum Verified {
    /// Its first match.
    Match(FirstMatch),
    /// No match (or binary before one).
    NoMatch,
    /// It could not be opened beneath the root without following a symlink, or read.
    Unreadable,
}

/// A searcher for verification: the profile's, with snippet windows of [`SNIPPET_WINDOW`].
pub(crate) fn searcher() -> FileSearcher {
    FileSearcher::new(search_profile::DEFAULT_HEAP_LIMIT, SNIPPET_WINDOW)
}

/// Searches the file at `rel` for its first match, exactly as the literal search would.
pub(crate) fn first_match(
    searcher: &mut FileSearcher,
    matcher: &LiteralMatcher,
    dir: &RootDir,
    rel: &str,
    control: &dyn SearchControl,
) -> Verified {
    let Ok(file) = dir.open_file(rel) else {
        return Verified::Unreadable;
    };
    let mut found = None;
    let result = searcher.search(matcher, file, control, |m| {
        let body = m.line.strip_suffix(b"\n").unwrap_or(m.line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let lo = m.start.saturating_sub(SNIPPET_WINDOW / 4);
        let hi = (lo + SNIPPET_WINDOW).min(body.len());
        found = Some(FirstMatch {
            line: m.line_number,
            column: m.column,
            snippet: String::from_utf8_lossy(&body[lo.min(hi)..hi]).into_owned(),
            shape: crate::rank::shape(body, m.start, m.end),
        });
        false
    });
    match (result, found) {
        (Err(_), _) => Verified::Unreadable,
        (Ok(_), Some(m)) => Verified::Match(m),
        (Ok(_), None) => Verified::NoMatch,
    }
}
