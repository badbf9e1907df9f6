//! The search options beyond the query (regex, file filters, output, context, paging): their
//! bounds, and whether the mode and the backend's declared capabilities can honour them. An option
//! that cannot be honoured is refused, never ignored.

use index_contract::{
    BackendCapabilities, ErrorCode, IndexError, OutputMode, SearchMode, SearchRequest,
    limits::{MAX_CONTEXT_LINES, MAX_FILE_FILTERS, MAX_OFFSET, MAX_PATH_BYTES},
};

use crate::query::cap_message;

/// What serves the request: the literal search (every option) or an index backend (what its
/// capabilities declare).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionSupport {
    /// The native literal search, which honours every option.
    Literal,
    /// An index backend, with the capabilities it declared.
    Backend(BackendCapabilities),
}

/// Checks the bounds of a request's options, then that `support` honours each one in the request's
/// mode.
///
/// Bounds: at most [`MAX_CONTEXT_LINES`] of context either side, and context only with
/// `output: content`; `offset` at most [`MAX_OFFSET`]; at most [`MAX_FILE_FILTERS`] globs and as many
/// types, each non-empty and within [`MAX_PATH_BYTES`]. The syntax of a glob, a type name or a
/// regex is the profile's to check, since it owns the matchers.
///
/// # Example
///
/// ```
/// use index_contract::{BackendCapabilities, ErrorCode, SearchMode, SearchRequest};
/// use index_guard::{OptionSupport, check_options};
///
/// let mut request = SearchRequest::new("fn\\s+main", SearchMode::IndexedLiteral);
/// request.regex = true;
/// assert!(check_options(&request, OptionSupport::Literal).is_ok());
/// let plain = OptionSupport::Backend(BackendCapabilities::default());
/// assert_eq!(check_options(&request, plain).unwrap_err().code(), ErrorCode::Unsupported);
/// ```
pub fn check_options(request: &SearchRequest, support: OptionSupport) -> Result<(), IndexError> {
    check_bounds(request)?;
    let mode = request.mode;
    let unsupported = |option: &'static str| Err(IndexError::OptionUnsupported { option, mode });
    // Matching options mean nothing to a semantic query, whatever the backend declares.
    if mode == SearchMode::Semantic {
        if request.regex {
            return unsupported("regex");
        }
        if request.output == OutputMode::Count {
            return unsupported("output");
        }
        if request.context.any() {
            return unsupported(context_option(request));
        }
        if request.multiline {
            return unsupported("multiline");
        }
    }
    let OptionSupport::Backend(caps) = support else {
        return Ok(());
    };
    if !mode.is_indexed() {
        return Ok(());
    }
    if request.regex && !caps.regex {
        return unsupported("regex");
    }
    if request.multiline && !caps.multiline {
        return unsupported("multiline");
    }
    // An include glob or a type can select hidden or ignored files (ripgrep's precedence);
    // globs that all exclude only narrow the selection.
    let globs = &request.files.globs;
    let includes = globs.iter().any(|g| !g.starts_with('!'));
    if !globs.is_empty() && !caps.file_filters && (includes || !caps.exclude_globs) {
        return unsupported("glob");
    }
    if !request.files.types.is_empty() && !caps.file_filters {
        return unsupported("type");
    }
    if request.files.include_hidden && !caps.hidden_files {
        return unsupported("include_hidden");
    }
    if request.files.include_ignored && !caps.ignored_files {
        return unsupported("include_ignored");
    }
    if request.output == OutputMode::Count && !caps.count {
        return unsupported("output");
    }
    if request.context.any() && !caps.context {
        return unsupported(context_option(request));
    }
    if (request.offset > 0 || request.page_token.is_some()) && !caps.paging {
        return unsupported("offset");
    }
    Ok(())
}

fn context_option(request: &SearchRequest) -> &'static str {
    if request.context.before > 0 {
        "context_before"
    } else {
        "context_after"
    }
}

const CONTEXT_MESSAGE: &str = cap_message!("is more than ", MAX_CONTEXT_LINES as usize, " lines");
const OFFSET_MESSAGE: &str =
    cap_message!("is more than ", MAX_OFFSET, "; narrow the query instead");
const FILTERS_MESSAGE: &str = cap_message!("has more than ", MAX_FILE_FILTERS, " entries");
const GLOB_BYTES_MESSAGE: &str =
    cap_message!("has an entry longer than ", MAX_PATH_BYTES, " bytes");

fn check_bounds(request: &SearchRequest) -> Result<(), IndexError> {
    let limit = |argument: &'static str, problem: &'static str| {
        Err(IndexError::InvalidArgument {
            argument,
            problem,
            code: ErrorCode::Limit,
        })
    };
    let context = request.context;
    if context.before > MAX_CONTEXT_LINES {
        return limit("context_before", CONTEXT_MESSAGE);
    }
    if context.after > MAX_CONTEXT_LINES {
        return limit("context_after", CONTEXT_MESSAGE);
    }
    if context.any() && request.output != OutputMode::Content {
        return Err(IndexError::InvalidArgument {
            argument: context_option(request),
            problem: "applies only to `output: content`; drop it or the `output` argument",
            code: ErrorCode::Unsupported,
        });
    }
    if request.offset > MAX_OFFSET {
        return limit("offset", OFFSET_MESSAGE);
    }
    let files = &request.files;
    if files.globs.len() > MAX_FILE_FILTERS {
        return limit("glob", FILTERS_MESSAGE);
    }
    if files.types.len() > MAX_FILE_FILTERS {
        return limit("type", FILTERS_MESSAGE);
    }
    if files.globs.iter().any(|g| g.len() > MAX_PATH_BYTES) {
        return limit("glob", GLOB_BYTES_MESSAGE);
    }
    for (argument, list) in [("glob", &files.globs), ("type", &files.types)] {
        if list.iter().any(|g| g.is_empty() || g.contains('\0')) {
            return Err(IndexError::InvalidArgument {
                argument,
                problem: "has an empty entry or one with a NUL byte",
                code: ErrorCode::Unsupported,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use index_contract::{BackendCapabilities, ErrorCode, OutputMode, SearchMode, SearchRequest};

    use super::{OptionSupport, check_options};

    fn check(edit: impl Fn(&mut SearchRequest), support: OptionSupport, expected: Option<&str>) {
        let mut r = SearchRequest::new("x", SearchMode::IndexedLiteral);
        edit(&mut r);
        let got = check_options(&r, support).err().map(|e| e.to_string());
        match (expected, got) {
            (None, None) => {}
            (Some(want), Some(got)) => assert!(got.contains(want), "{got:?} lacks {want:?}"),
            (want, got) => panic!("expected {want:?}, got {got:?}"),
        }
    }

    #[test]
    fn an_option_the_backend_does_not_declare_is_refused_by_name() {
        let none = OptionSupport::Backend(BackendCapabilities::default());
        let all = OptionSupport::Backend(BackendCapabilities {
            semantic: true,
            regex: true,
            file_filters: true,
            exclude_globs: false,
            count: true,
            context: true,
            paging: true,
            hidden_files: true,
            ignored_files: true,
            multiline: true,
        });
        type Edit = fn(&mut SearchRequest);
        let cases: [(Edit, &str); 11] = [
            (|r| r.regex = true, "`regex`"),
            (|r| r.multiline = true, "`multiline`"),
            (|r| r.files.globs = vec!["*.rs".into()], "`glob`"),
            (
                |r| r.files.globs = vec!["!a".into(), "*.rs".into()],
                "`glob`",
            ),
            (|r| r.files.types = vec!["rust".into()], "`type`"),
            (|r| r.files.include_hidden = true, "`include_hidden`"),
            (|r| r.files.include_ignored = true, "`include_ignored`"),
            (|r| r.output = OutputMode::Count, "`output`"),
            (|r| r.context.after = 2, "`context_after`"),
            (|r| r.offset = 10, "`offset`"),
            (|r| r.page_token = Some("t".into()), "`offset`"),
        ];
        for (edit, name) in cases {
            check(edit, none, Some(name));
            check(edit, all, None);
            check(edit, OptionSupport::Literal, None);
        }
        // `files` output needs nothing beyond one hit per file.
        check(|r| r.output = OutputMode::Files, none, None);
        // Globs that all exclude need only `exclude_globs`; an include among them needs more.
        let excludes = OptionSupport::Backend(BackendCapabilities {
            exclude_globs: true,
            ..BackendCapabilities::default()
        });
        check(
            |r| r.files.globs = vec!["!*.md".into(), "!a/**".into()],
            excludes,
            None,
        );
        check(
            |r| r.files.globs = vec!["!*.md".into(), "*.rs".into()],
            excludes,
            Some("`glob`"),
        );
        check(
            |r| r.files.types = vec!["rust".into()],
            excludes,
            Some("`type`"),
        );
    }

    #[test]
    fn matching_options_are_refused_in_semantic_mode_whatever_the_backend_declares() {
        let all = OptionSupport::Backend(BackendCapabilities {
            semantic: true,
            regex: true,
            count: true,
            context: true,
            multiline: true,
            ..BackendCapabilities::default()
        });
        let semantic = |edit: fn(&mut SearchRequest)| {
            move |r: &mut SearchRequest| {
                r.mode = SearchMode::Semantic;
                edit(r)
            }
        };
        check(semantic(|r| r.regex = true), all, Some("`regex`"));
        check(
            semantic(|r| r.output = OutputMode::Count),
            all,
            Some("`output`"),
        );
        check(
            semantic(|r| r.context.before = 1),
            all,
            Some("`context_before`"),
        );
        check(semantic(|r| r.multiline = true), all, Some("`multiline`"));
        check(semantic(|_| {}), all, None);
    }

    #[test]
    fn option_bounds() {
        let lit = OptionSupport::Literal;
        check(|r| r.context.before = 20, lit, None);
        check(|r| r.context.before = 21, lit, Some("more than 20 lines"));
        check(|r| r.context.after = 21, lit, Some("`context_after`"));
        check(
            |r| {
                r.context.after = 1;
                r.output = OutputMode::Files
            },
            lit,
            Some("applies only to `output: content`"),
        );
        check(|r| r.offset = 100_000, lit, None);
        check(|r| r.offset = 100_001, lit, Some("more than 100000"));
        check(|r| r.files.globs = vec!["*".into(); 32], lit, None);
        check(
            |r| r.files.globs = vec!["*".into(); 33],
            lit,
            Some("more than 32"),
        );
        check(
            |r| r.files.types = vec!["c".into(); 33],
            lit,
            Some("`type`"),
        );
        check(
            |r| r.files.globs = vec![String::new()],
            lit,
            Some("empty entry"),
        );
        check(|r| r.files.types = vec!["a\0".into()], lit, Some("NUL"));
        check(
            |r| r.files.globs = vec!["a".repeat(4097)],
            lit,
            Some("4096 bytes"),
        );
        let mut r = SearchRequest::new("x", SearchMode::Literal);
        r.offset = 100_001;
        assert_eq!(check_options(&r, lit).unwrap_err().code(), ErrorCode::Limit);
    }
}
