//! Checking a request's patterns (a regex query, globs, file types) with the matchers that will
//! run them, so that a bad pattern is refused with a clear error before any search or backend
//! call, in every mode alike.

use index_contract::{FileFilter, IndexError, SearchMode, SearchRequest};

/// Checks that `request`'s regex (when `regex` is set), globs and types compile as ripgrep
/// compiles them.
///
/// # Example
///
/// ```
/// use index_contract::{ErrorCode, SearchMode, SearchRequest};
///
/// let mut request = SearchRequest::new("fn\\s+(", SearchMode::Literal);
/// request.regex = true;
/// let err = search_profile::check_patterns(&request).unwrap_err();
/// assert_eq!(err.code(), ErrorCode::Unsupported);
/// request.query = "fn\\s+main".into();
/// request.files.types = vec!["rust".into()];
/// assert!(search_profile::check_patterns(&request).is_ok());
/// ```
pub fn check_patterns(request: &SearchRequest) -> Result<(), IndexError> {
    if request.regex && request.mode != SearchMode::Semantic {
        crate::request_matcher(request)?;
    }
    check_file_filter(&request.files)
}

/// Checks every glob and type name as ripgrep's `-g` and `-t` take them: by building the
/// [`crate::PathFilter`] that applies them.
pub fn check_file_filter(files: &FileFilter) -> Result<(), IndexError> {
    crate::PathFilter::new(files).map(drop)
}

#[cfg(test)]
mod tests {
    use index_contract::{ErrorCode, RegexRejection, SearchMode, SearchRequest};

    use super::check_patterns;

    fn check(query: &str, expected: Option<RegexRejection>) {
        let mut r = SearchRequest::new(query, SearchMode::Literal);
        r.regex = true;
        let got = match check_patterns(&r) {
            Ok(()) => None,
            Err(index_contract::IndexError::InvalidRegex { reason }) => Some(reason),
            Err(other) => panic!("{query}: {other}"),
        };
        assert_eq!(got, expected, "{query}");
    }

    #[test]
    fn regex_refusals_say_why() {
        check(r"fn\s+new_[a-z]+\(", None);
        check(r"(?i)foo|bar", None);
        check("fn (", Some(RegexRejection::Syntax));
        check("a[", Some(RegexRejection::Syntax));
        check("(?=x)", Some(RegexRejection::Unsupported));
        check(r"(a)\1", Some(RegexRejection::Unsupported));
        check(r"a\nb", Some(RegexRejection::LineTerminator));
        check(r"\w{1000}{1000}", Some(RegexRejection::TooBig));
        check(r"\p{Bogus}", Some(RegexRejection::Syntax));
        check(r"a\x00", Some(RegexRejection::Syntax));
    }

    #[test]
    fn globs_and_types_are_checked_by_position() {
        let mut r = SearchRequest::new("x", SearchMode::Literal);
        r.files.globs = vec!["*.rs".into(), "!src/**".into(), "a[".into()];
        let err = check_patterns(&r).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Unsupported);
        assert!(err.to_string().contains("entry 2"), "{err}");
        r.files.globs.pop();
        r.files.types = vec!["rust".into(), "nosuchtype".into()];
        let err = check_patterns(&r).unwrap_err();
        assert!(err.to_string().contains("entry 1"), "{err}");
        r.files.types.pop();
        assert!(check_patterns(&r).is_ok());
    }
}
