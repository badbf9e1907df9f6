//! The `path` argument's policy: which scopes the tool takes, as the schema's pattern and as the
//! check a call goes through, both written from one list of forbidden characters.

use index_contract::{Field, IndexError, PathRejection};
use index_guard::{Scope, check_scope_chars};

/// Characters a `path` may not contain besides `/` between segments, as inclusive ranges: `\`,
/// C0 and C1 controls, DEL, and the look-alikes and invisibles the guard refuses. The schema's
/// pattern is written from this list ([`segment_forbidden_class`]) and the tool refuses the same
/// characters, so that it accepts exactly the `path` the schema accepts; the guard alone lets a
/// dot look-alike or an ellipsis through inside a name (`Loading….md`), which a pattern cannot
/// tell from one that reads as `..` (`every_path_the_tool_accepts_its_schema_accepts`).
const PATH_FORBIDDEN: &[(char, char)] = &[
    ('\\', '\\'),
    ('\u{0000}', '\u{001f}'),
    ('\u{007f}', '\u{009f}'),
    ('\u{2024}', '\u{2026}'),
    ('\u{FE52}', '\u{FE52}'),
    ('\u{FF0E}', '\u{FF0E}'),
    ('\u{2044}', '\u{2044}'),
    ('\u{2215}', '\u{2215}'),
    ('\u{29F8}', '\u{29F8}'),
    ('\u{FF0F}', '\u{FF0F}'),
    ('\u{2216}', '\u{2216}'),
    ('\u{29F5}', '\u{29F5}'),
    ('\u{29F9}', '\u{29F9}'),
    ('\u{FE68}', '\u{FE68}'),
    ('\u{FF3C}', '\u{FF3C}'),
    ('\u{FF1A}', '\u{FF1A}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{202A}', '\u{202E}'),
    ('\u{2066}', '\u{2069}'),
    ('\u{FEFF}', '\u{FEFF}'),
];

fn path_forbids(c: char) -> bool {
    PATH_FORBIDDEN
        .iter()
        .any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// The characters a path segment may not contain, as a regex character-class body: `/` and
/// [`PATH_FORBIDDEN`], each as a `\u` escape (`\` as `\\`).
fn segment_forbidden_class() -> String {
    let escape = |c: char| match c {
        '\\' => "\\\\".to_owned(),
        c => format!("\\u{:04X}", u32::from(c)),
    };
    let mut class = String::from("/");
    for &(lo, hi) in PATH_FORBIDDEN {
        class.push_str(&escape(lo));
        if hi != lo {
            class.push('-');
            class.push_str(&escape(hi));
        }
    }
    class
}

/// The schema's `pattern` for `path`: the root (`""`, `.`, `./`), or `/`-separated segments
/// without a drive prefix, a `.` or `..` segment or a forbidden character, with one optional
/// trailing `/`.
pub(crate) fn path_pattern() -> String {
    let segment = format!("(?!\\.\\.?(?:/|$))[^{}]+", segment_forbidden_class());
    format!("^(?:|\\./?|(?![A-Za-z]:){segment}(?:/{segment})*/?)$")
}

/// Checks a `path` argument as [`path_pattern`] does, with the error the guard gives: its length
/// and characters, then the guard's containment rules (an escaping scope is refused, never
/// searched), then the look-alikes the pattern refuses anywhere in a name.
pub(crate) fn check_path(path: &str) -> Result<(), IndexError> {
    check_scope_chars(path)?;
    Scope::parse(Some(path))?;
    if path.chars().any(path_forbids) {
        return Err(IndexError::UntrustedPath {
            field: Field::Scope,
            reason: PathRejection::Lookalike,
        });
    }
    Ok(())
}
