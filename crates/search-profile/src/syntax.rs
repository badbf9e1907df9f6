//! ripgrep's regex configuration, once: the settings `rg` gives grep-regex, used to build the
//! matcher and to parse a query's syntax for planners, so that what an index plans for is what
//! the matcher matches.

use grep_regex::RegexMatcherBuilder;
use index_contract::{
    RegexRejection,
    limits::{REGEX_DFA_CACHE_BYTES, REGEX_SIZE_LIMIT_BYTES},
};
use regex_syntax::hir::Hir;

/// Classes and case folding are Unicode's.
const UNICODE: bool = true;
/// `\0` to `\777` are not octal escapes (they are backreferences, refused).
const OCTAL: bool = false;
/// `^` and `$` match at line boundaries.
const MULTI_LINE: bool = true;
/// `.` never matches a line break.
const DOT_MATCHES_NEW_LINE: bool = false;

/// How a query is matched besides its text: ripgrep's `-i` and `-U`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MatchOptions {
    /// Case-insensitive matching (`-i`).
    pub(crate) case_insensitive: bool,
    /// Matches may span lines (`-U`): no line terminator is stripped from the pattern.
    pub(crate) multiline: bool,
}

/// The matcher's configuration for a query (`rg` with `-i` and `-U` as `options` say): the
/// settings above, lines ended by `\n` (unless multiline, where a match may hold one, as `rg -U`
/// configures it), and no match holding a NUL (files holding one are binary and skipped). A regex
/// adds the contract's size limits ([`regex_builder`]); a fixed string, at most `MAX_QUERY_BYTES`
/// long, keeps grep-regex's own.
pub(crate) fn matcher_builder(options: MatchOptions) -> RegexMatcherBuilder {
    let mut b = RegexMatcherBuilder::new();
    b.multi_line(MULTI_LINE)
        .unicode(UNICODE)
        .octal(OCTAL)
        .case_insensitive(options.case_insensitive)
        .line_terminator((!options.multiline).then_some(b'\n'))
        .dot_matches_new_line(DOT_MATCHES_NEW_LINE)
        .ban_byte(Some(b'\x00'));
    b
}

/// The matcher's configuration for a regex (`rg` without `-F`), with the contract's size limits.
pub(crate) fn regex_builder(options: MatchOptions) -> RegexMatcherBuilder {
    let mut b = matcher_builder(options);
    b.size_limit(REGEX_SIZE_LIMIT_BYTES)
        .dfa_size_limit(REGEX_DFA_CACHE_BYTES);
    b
}

/// The syntax of a query as grep-regex parses it before matching: a regex when `regex` is set,
/// a fixed string otherwise, wrapped in a group as grep-regex wraps each pattern, with byte
/// classes allowed; `None` when it does not parse (the matcher refuses it too). Planners read it
/// to find what every match must contain.
///
/// The line terminator is not stripped from classes here (grep-regex strips it after parsing),
/// so a class may still hold `\n`: that only widens what a planner derives from it, never drops
/// a match.
///
/// # Example
///
/// ```
/// let hir = search_profile::query_hir(r"fn\s+new_[a-z]+", true, false).unwrap();
/// assert_eq!(hir.properties().minimum_len(), Some(8));
/// assert!(search_profile::query_hir("fn (", true, false).is_none());
/// assert!(search_profile::query_hir("fn (", false, false).is_some());
/// ```
pub fn query_hir(query: &str, regex: bool, case_insensitive: bool) -> Option<Hir> {
    let pattern = if regex {
        format!("(?:{query})")
    } else {
        format!("(?:{})", regex_syntax::escape(query))
    };
    regex_syntax::ParserBuilder::new()
        .utf8(false)
        .unicode(UNICODE)
        .octal(OCTAL)
        .multi_line(MULTI_LINE)
        .dot_matches_new_line(DOT_MATCHES_NEW_LINE)
        .case_insensitive(case_insensitive)
        .build()
        .parse(&pattern)
        .ok()
}

/// Why the matcher's configuration refused `pattern` with `error`.
pub(crate) fn regex_rejection(pattern: &str, error: &grep_regex::Error) -> RegexRejection {
    use regex_syntax::ast::ErrorKind as Ast;
    match regex_syntax::ast::parse::Parser::new().parse(pattern) {
        Err(e)
            if matches!(
                e.kind(),
                Ast::UnsupportedLookAround | Ast::UnsupportedBackreference
            ) =>
        {
            RegexRejection::Unsupported
        }
        Err(_) => RegexRejection::Syntax,
        Ok(_) => match error.kind() {
            grep_regex::ErrorKind::NotAllowed(_) => RegexRejection::LineTerminator,
            // A NUL can never match: files holding one are binary and skipped.
            grep_regex::ErrorKind::Banned(_) => RegexRejection::Syntax,
            // The syntax tree parses, but its translation can still fail (an unknown Unicode
            // class such as `\p{Bogus}`): that is the pattern's fault, not a size.
            _ if query_hir(pattern, true, false).is_none() => RegexRejection::Syntax,
            // A pattern that translates and is allowed fails only on a size limit.
            _ => RegexRejection::TooBig,
        },
    }
}

#[cfg(test)]
mod tests {
    use grep_matcher::Matcher;

    use super::{query_hir, regex_builder};

    /// What the planners read and what the matcher runs agree: a pattern the matcher compiles
    /// parses here and finds the same first match, and one it refuses for its syntax does not
    /// parse.
    #[test]
    fn planners_parse_a_pattern_as_the_matcher_compiles_it() {
        let check = |pattern: &str, ci: bool, line: &[u8], expected: Option<(usize, usize)>| {
            let options = super::MatchOptions {
                case_insensitive: ci,
                multiline: false,
            };
            let matcher = regex_builder(options).build(pattern).unwrap();
            let found = matcher.find(line).unwrap().map(|m| (m.start(), m.end()));
            let from_syntax = regex_automata::meta::Builder::new()
                .configure(regex_automata::meta::Config::new().utf8_empty(false))
                .build_from_hir(&query_hir(pattern, true, ci).unwrap())
                .unwrap()
                .find(line)
                .map(|m| (m.start(), m.end()));
            assert_eq!(
                (found, from_syntax),
                (expected, expected),
                "{pattern:?} ci={ci}"
            );
        };
        check("^fn", false, b"x\nfn", Some((2, 4)));
        check("a$", false, b"a\nb", Some((0, 1)));
        check("a.b", false, b"a\nb axb", Some((4, 7)));
        check(r"\x{212A}", true, "k".as_bytes(), Some((0, 1)));
        check(r"\x{212A}", false, "k".as_bytes(), None);
        check("é", true, "É".as_bytes(), Some((0, 2)));
        check(r"\d", false, "x ٣".as_bytes(), Some((2, 4)));
        check(r"\w+", false, "é!".as_bytes(), Some((0, 2)));
        check(r"(?-u:\xFF)", false, b"a\xFF", Some((1, 2)));
        check("a)(b", false, b"ab", Some((0, 2)));
        check("x|y", false, b"ay", Some((1, 2)));
        for refused in ["fn (", r"\101", "(?=x)", r"\p{Bogus}"] {
            let options = super::MatchOptions::default();
            assert!(
                regex_builder(options).build(refused).is_err(),
                "{refused:?}"
            );
            assert!(query_hir(refused, true, false).is_none(), "{refused:?}");
        }
    }
}
