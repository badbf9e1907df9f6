//! Query and argument-length validation: the one home of the rules every entry point (the literal
//! search, the facade's index modes and the tool's arguments) applies to a query's text.
//!
//! Messages that name a cap are rendered at compile time from the cap itself, so they cannot drift
//! from `index_contract::limits`.

use index_contract::{
    ErrorCode, IndexError, SearchMode, SearchRequest,
    limits::{MAX_PATH_BYTES, MAX_QUERY_BYTES},
};

/// The most characters a query may have, as the tool's schema counts them (JSON Schema's
/// `maxLength` counts characters). A UTF-8 character takes at most 4 bytes, so deriving it from
/// [`MAX_QUERY_BYTES`] keeps every query within the character cap also within the byte cap.
pub const MAX_QUERY_CHARS: usize = MAX_QUERY_BYTES / 4;

/// The most characters a scope may have, derived from [`MAX_PATH_BYTES`] as [`MAX_QUERY_CHARS`] is
/// from the query byte cap.
pub const MAX_PATH_CHARS: usize = MAX_PATH_BYTES / 4;

/// Checks a fixed-string query (the `literal` and `indexed_literal` modes): non-empty, at most
/// [`MAX_QUERY_BYTES`], one line (search is line by line) and without NUL (files holding one are
/// binary and skipped, so such a query could never match).
///
/// # Example
///
/// ```
/// use index_contract::ErrorCode;
/// use index_guard::check_query;
///
/// assert!(check_query("fn main").is_ok());
/// assert_eq!(check_query("").unwrap_err().code(), ErrorCode::Unsupported);
/// assert_eq!(check_query(&"x".repeat(5000)).unwrap_err().code(), ErrorCode::Limit);
/// ```
pub fn check_query(query: &str) -> Result<(), IndexError> {
    check_text(query)?;
    if query.contains(['\n', '\r']) {
        return Err(unsupported(
            "must be a single line unless `multiline` is set",
        ));
    }
    check_no_nul(query)
}

fn check_no_nul(query: &str) -> Result<(), IndexError> {
    if query.contains('\0') {
        return Err(unsupported(
            "must not contain a NUL byte: files with NUL bytes are binary and skipped",
        ));
    }
    Ok(())
}

/// Checks the query of an index-mode request. `semantic` queries are natural language, so they
/// only need to be non-empty and within [`MAX_QUERY_BYTES`]; the fixed-string modes follow
/// [`check_query`].
pub fn check_index_query(query: &str, mode: SearchMode) -> Result<(), IndexError> {
    match mode {
        SearchMode::Semantic => check_text(query),
        SearchMode::Literal | SearchMode::IndexedLiteral => check_query(query),
    }
}

/// Checks the query of a request as its options shape it: [`check_index_query`] in its mode, except
/// that a `multiline` request in a fixed-string mode may hold line breaks, since its matches may
/// span lines.
///
/// # Example
///
/// ```
/// use index_contract::{SearchMode, SearchRequest};
/// use index_guard::check_request_query;
///
/// let mut request = SearchRequest::new("fn main() {\n", SearchMode::Literal);
/// assert!(check_request_query(&request).is_err());
/// request.multiline = true;
/// assert!(check_request_query(&request).is_ok());
/// ```
pub fn check_request_query(request: &SearchRequest) -> Result<(), IndexError> {
    let query = &request.query;
    if request.multiline && request.mode != SearchMode::Semantic {
        check_text(query)?;
        return check_no_nul(query);
    }
    check_index_query(query, request.mode)
}

/// Checks a tool call's `query` argument: within [`MAX_QUERY_CHARS`] characters (the schema's
/// `maxLength`), then one line without NUL in every mode ([`check_query`]; the schema's pattern
/// says so too), unless the call sets `multiline` ([`check_request_query`]).
pub fn check_tool_query(request: &SearchRequest) -> Result<(), IndexError> {
    if request.query.chars().count() > MAX_QUERY_CHARS {
        return Err(IndexError::InvalidArgument {
            argument: "query",
            problem: QUERY_CHARS_MESSAGE,
            code: ErrorCode::Limit,
        });
    }
    if request.multiline {
        check_request_query(request)
    } else {
        check_query(&request.query)
    }
}

/// Checks a tool call's `path` argument against [`MAX_PATH_CHARS`] (the schema's `maxLength`).
/// Containment is [`crate::Scope::parse`]'s job.
pub fn check_scope_chars(path: &str) -> Result<(), IndexError> {
    if path.chars().count() > MAX_PATH_CHARS {
        return Err(IndexError::InvalidArgument {
            argument: "path",
            problem: PATH_CHARS_MESSAGE,
            code: ErrorCode::Limit,
        });
    }
    Ok(())
}

/// The rules every mode shares: non-empty and within the byte cap.
fn check_text(query: &str) -> Result<(), IndexError> {
    if query.is_empty() {
        return Err(unsupported("must not be empty"));
    }
    if query.len() > MAX_QUERY_BYTES {
        return Err(IndexError::InvalidArgument {
            argument: "query",
            problem: QUERY_BYTES_MESSAGE,
            code: ErrorCode::Limit,
        });
    }
    Ok(())
}

fn unsupported(problem: &'static str) -> IndexError {
    IndexError::InvalidArgument {
        argument: "query",
        problem,
        code: ErrorCode::Unsupported,
    }
}

/// Renders `prefix`, a number and `suffix` into a `&'static str` at compile time.
macro_rules! cap_message {
    ($prefix:expr, $n:expr, $suffix:expr) => {{
        const LEN: usize = $prefix.len() + $crate::query::decimal_digits($n) + $suffix.len();
        const BYTES: [u8; LEN] = $crate::query::render($prefix, $n, $suffix);
        match std::str::from_utf8(&BYTES) {
            Ok(s) => s,
            Err(_) => panic!("a cap message is ASCII"),
        }
    }};
}

pub(crate) use cap_message;

/// `"is longer than {MAX_QUERY_BYTES} bytes"`.
const QUERY_BYTES_MESSAGE: &str = cap_message!("is longer than ", MAX_QUERY_BYTES, " bytes");
/// `"is longer than {MAX_QUERY_CHARS} characters"`.
const QUERY_CHARS_MESSAGE: &str = cap_message!("is longer than ", MAX_QUERY_CHARS, " characters");
/// `"is longer than {MAX_PATH_CHARS} characters"`.
const PATH_CHARS_MESSAGE: &str = cap_message!("is longer than ", MAX_PATH_CHARS, " characters");

pub(crate) const fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// Writes `prefix`, `n` in decimal and `suffix` into exactly `LEN` bytes (a mismatch fails the
/// build, since this only runs in constants).
pub(crate) const fn render<const LEN: usize>(prefix: &str, n: usize, suffix: &str) -> [u8; LEN] {
    let mut out = [0u8; LEN];
    let (prefix, suffix) = (prefix.as_bytes(), suffix.as_bytes());
    let mut i = 0;
    while i < prefix.len() {
        out[i] = prefix[i];
        i += 1;
    }
    let digits = decimal_digits(n);
    let (mut rest, mut d) = (n, digits);
    while d > 0 {
        d -= 1;
        out[i + d] = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    i += digits;
    let mut j = 0;
    while j < suffix.len() {
        out[i + j] = suffix[j];
        j += 1;
    }
    assert!(
        i + j == LEN,
        "a cap message's length is computed from its parts"
    );
    out
}
