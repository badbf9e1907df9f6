//! Containment of repo-relative paths.

use index_contract::{Field, IndexError, PathRejection, limits::MAX_PATH_BYTES};

/// Characters that render like a separator or a dot, and invisible or bidirectional controls.
///
/// A file may legitimately hold one of these on POSIX, but an agent reading `..／etc` or a
/// right-to-left override cannot tell what the path really is, so index output carrying them is
/// refused rather than shown.
const LOOKALIKES: &[char] = &[
    '\u{2024}', // ONE DOT LEADER
    '\u{2025}', // TWO DOT LEADER
    '\u{2026}', // HORIZONTAL ELLIPSIS
    '\u{FE52}', // SMALL FULL STOP
    '\u{FF0E}', // FULLWIDTH FULL STOP
    '\u{2044}', // FRACTION SLASH
    '\u{2215}', // DIVISION SLASH
    '\u{29F8}', // BIG SOLIDUS
    '\u{FF0F}', // FULLWIDTH SOLIDUS
    '\u{2216}', // SET MINUS
    '\u{29F5}', // REVERSE SOLIDUS OPERATOR
    '\u{29F9}', // BIG REVERSE SOLIDUS
    '\u{FE68}', // SMALL REVERSE SOLIDUS
    '\u{FF3C}', // FULLWIDTH REVERSE SOLIDUS
    '\u{FF1A}', // FULLWIDTH COLON
    '\u{200B}', // ZERO WIDTH SPACE
    '\u{200C}', // ZERO WIDTH NON-JOINER
    '\u{200D}', // ZERO WIDTH JOINER
    '\u{200E}', // LEFT-TO-RIGHT MARK
    '\u{200F}', // RIGHT-TO-LEFT MARK
    '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}',
    '\u{202E}', // bidi embeddings and overrides
    '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', // bidi isolates
    '\u{FEFF}', // ZERO WIDTH NO-BREAK SPACE
];

/// Checks that `path` is a canonical repo-relative path: non-empty, bounded, `/`-separated, with
/// no absolute or drive prefix, no backslash, NUL or control character, no empty, `.` or `..`
/// segment, and no look-alike characters.
///
/// Being canonical is what makes it contained: with no way to go up and no way to start at a
/// root, every such path names something under the root. Odd but honest names pass: `..test`,
/// `a..b`, `...`, `%2e%2e`, spaces, non-ASCII.
pub fn check_path(path: &str) -> Result<(), PathRejection> {
    if path.is_empty() {
        return Err(PathRejection::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathRejection::TooLong);
    }
    if path.starts_with('/') {
        return Err(PathRejection::Absolute);
    }
    let bytes = path.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(PathRejection::DrivePrefix);
    }
    for c in path.chars() {
        match c {
            '\\' => return Err(PathRejection::Backslash),
            '\0' => return Err(PathRejection::Nul),
            c if c.is_control() => return Err(PathRejection::ControlCharacter),
            c if LOOKALIKES.contains(&c) => return Err(PathRejection::Lookalike),
            _ => {}
        }
    }
    for segment in path.split('/') {
        match segment {
            "" => return Err(PathRejection::EmptySegment),
            "." => return Err(PathRejection::DotSegment),
            ".." => return Err(PathRejection::ParentSegment),
            _ => {}
        }
    }
    Ok(())
}

/// A checked search scope: the whole repository, or one repo-relative directory or file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    prefix: Option<String>,
}

impl Scope {
    /// The whole repository.
    pub fn root() -> Scope {
        Scope { prefix: None }
    }

    /// Parses a request's `path`. `None`, `""` and `"."` mean the whole repository; one trailing
    /// `/` is allowed (`src/`); anything that fails [`check_path`] is refused as
    /// [`IndexError::UntrustedPath`], so an escaping scope is never searched.
    pub fn parse(path: Option<&str>) -> Result<Scope, IndexError> {
        let Some(raw) = path else {
            return Ok(Scope::root());
        };
        if raw.is_empty() || raw == "." || raw == "./" {
            return Ok(Scope::root());
        }
        let trimmed = raw.strip_suffix('/').unwrap_or(raw);
        check_path(trimmed).map_err(|reason| IndexError::UntrustedPath {
            field: Field::Scope,
            reason,
        })?;
        Ok(Scope {
            prefix: Some(trimmed.to_owned()),
        })
    }

    /// The scope as a repo-relative path, or `None` for the whole repository.
    pub fn as_path(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// Whether `path` (already checked) lies inside the scope, compared component-wise: scope
    /// `src` admits `src` and `src/a`, never `srcx/a`.
    pub fn contains(&self, path: &str) -> bool {
        match &self.prefix {
            None => true,
            Some(p) => is_within(path, p),
        }
    }
}

/// Checks a path that came from outside (`field` says which) and maps a refusal to
/// [`IndexError::UntrustedPath`].
pub fn check_field_path(field: Field, path: &str) -> Result<(), IndexError> {
    check_path(path).map_err(|reason| IndexError::UntrustedPath { field, reason })
}

/// Whether the repo-relative `path` is `prefix` or lies below it, compared component-wise:
/// `src` holds `src` and `src/a`, never `srcx/a`. The one containment rule every searcher uses.
pub fn is_within(path: &str, prefix: &str) -> bool {
    path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}
