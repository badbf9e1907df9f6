//! The compiled query: ripgrep's matcher for a fixed string or a regex, and the matching line
//! it reports to a sink.

use grep_matcher::Matcher;
use grep_regex::RegexMatcher;
use index_contract::{ErrorCode, IndexError, SearchRequest};

use crate::syntax::{self, MatchOptions};

/// A compiled query: ripgrep's matcher with its defaults, for a fixed string (`rg -F`) or a regex
/// (`rg` without `-F`).
#[derive(Debug, Clone)]
pub struct QueryMatcher {
    inner: RegexMatcher,
    max_match_bytes: Option<usize>,
    regex: bool,
    multiline: bool,
}

impl QueryMatcher {
    /// The underlying grep matcher.
    pub fn inner(&self) -> &RegexMatcher {
        &self.inner
    }

    /// An upper bound on the bytes of any match, when there is one. A fixed string has one: no
    /// match is longer than 4 bytes per character of the query (case folding can change a
    /// character's encoded length, never beyond 4 bytes). A regex has one when its syntax bounds
    /// it (`foo[0-9]{2}`); `None` for a regex with unbounded repetition (`fn\s+\w+`).
    ///
    /// The bounded stream for lines over the heap limit needs the bound: a regex without one
    /// cannot be searched there (see [`crate::SearchFileError::LineTooLong`]).
    pub fn max_match_bytes(&self) -> Option<usize> {
        self.max_match_bytes
    }

    /// Whether the query is a regex rather than a fixed string.
    pub fn is_regex(&self) -> bool {
        self.regex
    }

    /// Whether matches may span lines (`rg -U`): a [`crate::FileSearcher`] then searches the
    /// whole file at once.
    pub fn is_multiline(&self) -> bool {
        self.multiline
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
pub fn matcher(query: &str, case_insensitive: bool) -> Result<QueryMatcher, grep_regex::Error> {
    fixed_matcher(
        query,
        MatchOptions {
            case_insensitive,
            multiline: false,
        },
    )
}

fn fixed_matcher(query: &str, options: MatchOptions) -> Result<QueryMatcher, grep_regex::Error> {
    let inner = syntax::matcher_builder(options)
        .fixed_strings(true)
        .build(query)?;
    Ok(QueryMatcher {
        inner,
        max_match_bytes: Some(4 * query.chars().count()),
        regex: false,
        multiline: options.multiline,
    })
}

/// Compiles `query` as ripgrep compiles `rg QUERY` when `regex` is set, `rg -F QUERY` otherwise
/// (`-i` when `case_insensitive`).
///
/// A regex is refused as [`crate::check_patterns`] refuses it (`IndexError::InvalidRegex`, with
/// the reason); a fixed string that is too large to compile is refused with
/// the `Limit` code.
///
/// # Example
///
/// ```
/// let m = search_profile::query_matcher(r"fn\s+ma[a-z]n", true, false)?;
/// assert_eq!(m.find(b"pub fn  main()"), Some((4, 12)));
/// assert_eq!(m.max_match_bytes(), None);
/// let fixed = search_profile::query_matcher("a.b", false, true)?;
/// assert_eq!(fixed.find(b"axb A.B"), Some((4, 7)));
/// assert!(search_profile::query_matcher("fn (", true, false).is_err());
/// # Ok::<(), index_contract::IndexError>(())
/// ```
pub fn query_matcher(
    query: &str,
    regex: bool,
    case_insensitive: bool,
) -> Result<QueryMatcher, IndexError> {
    let options = MatchOptions {
        case_insensitive,
        multiline: false,
    };
    build_matcher(query, regex, options)
}

/// Compiles a request's query as ripgrep compiles it with the request's `regex`,
/// `case_insensitive` and `multiline` (`-U`), refusing it as [`query_matcher`] does.
///
/// # Example
///
/// ```
/// use index_contract::{SearchMode, SearchRequest};
///
/// let mut request = SearchRequest::new("a\\nb", SearchMode::Literal);
/// request.regex = true;
/// assert!(search_profile::request_matcher(&request).is_err());
/// request.multiline = true;
/// let m = search_profile::request_matcher(&request)?;
/// assert_eq!(m.find(b"xa\nb"), Some((1, 4)));
/// # Ok::<(), index_contract::IndexError>(())
/// ```
pub fn request_matcher(request: &SearchRequest) -> Result<QueryMatcher, IndexError> {
    let options = MatchOptions {
        case_insensitive: request.case_insensitive,
        multiline: request.multiline,
    };
    build_matcher(&request.query, request.regex, options)
}

fn build_matcher(
    query: &str,
    regex: bool,
    options: MatchOptions,
) -> Result<QueryMatcher, IndexError> {
    let case_insensitive = options.case_insensitive;
    if !regex {
        return fixed_matcher(query, options).map_err(|_| IndexError::InvalidArgument {
            argument: "query",
            problem: "could not be compiled into a matcher (it is too large)",
            code: ErrorCode::Limit,
        });
    }
    let inner =
        syntax::regex_builder(options)
            .build(query)
            .map_err(|e| IndexError::InvalidRegex {
                reason: syntax::regex_rejection(query, &e),
            })?;
    Ok(QueryMatcher {
        inner,
        max_match_bytes: regex_max_len(query, case_insensitive),
        regex: true,
        multiline: options.multiline,
    })
}

/// The most bytes a match of the regex can span, from its syntax parsed as grep-regex parses it
/// (stripping the line terminator, which grep-regex does after, only shortens matches). `None`
/// when repetition leaves it unbounded, or when the pattern does not parse here.
fn regex_max_len(query: &str, case_insensitive: bool) -> Option<usize> {
    syntax::query_hir(query, true, case_insensitive)?
        .properties()
        .maximum_len()
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
    /// With [`crate::ContextConfig::before`]: the lines before this one, nearest last, each without its
    /// terminator and cut to [`crate::ContextConfig::line_bytes`]. Fewer at the start of the file; empty
    /// without context.
    pub before: &'a [String],
    /// With [`crate::ContextConfig::after`]: the lines after this one, nearest first, cut likewise.
    /// Fewer at the end of the file (or where a NUL ended the search); empty without context.
    pub after: &'a [String],
}
