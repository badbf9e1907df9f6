//! Containment of repo-relative paths.

use index_contract::{Field, IndexError, PathRejection, limits::MAX_PATH_BYTES};
use unicode_normalization::UnicodeNormalization;

/// Invisible and bidirectional formatting characters: an agent reading a path that holds one
/// cannot tell what the path really is (a right-to-left override reorders what follows it).
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{061C}' // ARABIC LETTER MARK
        | '\u{200B}'..='\u{200D}' // ZERO WIDTH SPACE, NON-JOINER, JOINER
        | '\u{200E}' | '\u{200F}' // LEFT-TO-RIGHT and RIGHT-TO-LEFT MARK
        | '\u{202A}'..='\u{202E}' // bidi embeddings and overrides
        | '\u{2060}' // WORD JOINER
        | '\u{2066}'..='\u{2069}' // bidi isolates
        | '\u{FEFF}' // ZERO WIDTH NO-BREAK SPACE
    )
}

/// The UTS #39 prototype of a character confusable with `/`, `\` or `.` (confusables.txt,
/// version 14.0.0), or `None`.
///
/// Only the single-character entries marked `#*` (not identifier characters) whose prototype is
/// made of those three characters alone are kept. Letters and digits are left out on purpose:
/// the table also maps U+30CE KATAKANA LETTER NO, U+4E3F and U+4E36 (CJK ideographs) and U+0660
/// ARABIC-INDIC DIGIT ZERO to them, and refusing those would refuse ordinary Japanese, Chinese and
/// Arabic names. Entries whose prototype mixes a separator with letters (U+2105 CARE OF, `c/o`)
/// are caught by NFKC instead, and `%` (prototype `º/₀`) is an honest ASCII character.
fn confusable_prototype(c: char) -> Option<&'static str> {
    Some(match c {
        // U+1735 PHILIPPINE SINGLE PUNCTUATION, U+2041 CARET INSERTION POINT, U+2044 FRACTION
        // SLASH, U+2215 DIVISION SLASH, U+2571 BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER
        // LEFT, U+27CB MATHEMATICAL RISING DIAGONAL, U+29F6 SOLIDUS WITH OVERBAR, U+29F8 BIG
        // SOLIDUS, U+2F03 KANGXI RADICAL SLASH, U+31D3 CJK STROKE SP, U+1D23A GREEK INSTRUMENTAL
        // NOTATION SYMBOL-47.
        '\u{1735}' | '\u{2041}' | '\u{2044}' | '\u{2215}' | '\u{2571}' | '\u{27CB}'
        | '\u{29F6}' | '\u{29F8}' | '\u{2F03}' | '\u{31D3}' | '\u{1D23A}' => "/",
        // U+2AFD DOUBLE SOLIDUS OPERATOR.
        '\u{2AFD}' => "//",
        // U+2216 SET MINUS, U+27CD MATHEMATICAL FALLING DIAGONAL, U+29F5 REVERSE SOLIDUS
        // OPERATOR, U+29F9 BIG REVERSE SOLIDUS, U+2F02 KANGXI RADICAL DOT, U+31D4 CJK STROKE D,
        // U+FE68 SMALL REVERSE SOLIDUS, U+FF3C FULLWIDTH REVERSE SOLIDUS, U+1D20F GREEK VOCAL
        // NOTATION SYMBOL-16, U+1D23B GREEK INSTRUMENTAL NOTATION SYMBOL-48.
        '\u{2216}' | '\u{27CD}' | '\u{29F5}' | '\u{29F9}' | '\u{2F02}' | '\u{31D4}'
        | '\u{FE68}' | '\u{FF3C}' | '\u{1D20F}' | '\u{1D23B}' => "\\",
        // U+244A OCR DOUBLE BACKSLASH, U+2CF9 COPTIC OLD NUBIAN FULL STOP.
        '\u{244A}' | '\u{2CF9}' => "\\\\",
        // U+0701 SYRIAC SUPRALINEAR FULL STOP, U+0702 SYRIAC SUBLINEAR FULL STOP, U+2024 ONE DOT
        // LEADER, U+A60E VAI FULL STOP, U+10A50 KHAROSHTHI PUNCTUATION DOT.
        '\u{0701}' | '\u{0702}' | '\u{2024}' | '\u{A60E}' | '\u{10A50}' => ".",
        // U+2025 TWO DOT LEADER.
        '\u{2025}' => "..",
        // U+2026 HORIZONTAL ELLIPSIS.
        '\u{2026}' => "...",
        _ => return None,
    })
}

/// `text` with every character of [`confusable_prototype`] replaced by its prototype: the UTS #39
/// skeleton, restricted to separators and dots.
fn separator_skeleton(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match confusable_prototype(c) {
            Some(p) => out.push_str(p),
            None => out.push(c),
        }
    }
    out
}

/// Whether `text` starts with a drive prefix such as `C:`.
fn has_drive_prefix(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

/// Whether `c` is not a full stop but normalises to one or is confusable with one.
fn is_dot_lookalike(c: char) -> bool {
    c != '.' && (confusable_prototype(c) == Some(".") || c.to_string().nfkc().eq(['.']))
}

/// Whether `segment`, read through NFKC or through the separator skeleton, changes the path's
/// structure: it holds a `/` or `\`, is `.` or `..`, or (as the first segment) starts with a
/// drive prefix. A one-dot look-alike just before a `/` is refused too, since `x．/` reads as a
/// name ending in `.` followed by a separator.
///
/// Anything else passes, so a fullwidth colon, a fullwidth full stop inside a name or an ellipsis
/// (`说明：安装.md`, `第1章．概要.md`, `Loading….md`) is served like any other name.
fn spoofs_structure(segment: &str, first: bool, before_separator: bool) -> bool {
    // ASCII is its own NFKC form and holds no confusable: the common case costs no allocation.
    if segment.is_ascii() {
        return false;
    }
    let nfkc: String = segment.nfkc().collect();
    let views = [separator_skeleton(segment), separator_skeleton(&nfkc), nfkc];
    views.iter().any(|view| {
        view.contains(['/', '\\'])
            || view == "."
            || view == ".."
            || (first && has_drive_prefix(view))
    }) || (before_separator && segment.chars().next_back().is_some_and(is_dot_lookalike))
}

/// Code points that HFS+ ignores in names, so that `.g\u{200C}it` is `.git` on a Mac (the list
/// git's `next_hfs_char` skips).
fn is_hfs_ignorable(c: char) -> bool {
    matches!(c,
        '\u{200C}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{206A}'..='\u{206F}' | '\u{FEFF}')
}

/// `.git` as HFS+ sees it: ignorable code points dropped, ASCII case folded.
fn is_hfs_dotgit(name: &str) -> bool {
    let mut folded = name
        .chars()
        .filter(|&c| !is_hfs_ignorable(c))
        .map(|c| c.to_ascii_lowercase());
    folded.next() == Some('.')
        && folded.next() == Some('g')
        && folded.next() == Some('i')
        && folded.next() == Some('t')
        && folded.next().is_none()
}

/// `.git` as NTFS sees it: `.git` or its 8.3 short name `git~1`, in any case, followed only by
/// dots and spaces (which NTFS trims) up to the end or a `:` (an alternate data stream such as
/// `.git::$INDEX_ALLOCATION`).
fn is_ntfs_dotgit(name: &str) -> bool {
    let b = name.as_bytes();
    let rest = if b.len() >= 4 && b[0] == b'.' && b[1..4].eq_ignore_ascii_case(b"git") {
        &b[4..]
    } else if b.len() >= 5 && b[..3].eq_ignore_ascii_case(b"git") && &b[3..5] == b"~1" {
        &b[5..]
    } else {
        return false;
    };
    for &c in rest {
        match c {
            b':' => return true,
            b'.' | b' ' => {}
            _ => return false,
        }
    }
    true
}

/// Whether one path segment (a file or directory name) names git's own data: a name git itself
/// refuses to check out for every kind of file, because a filesystem may resolve it to `.git`.
///
/// That is `.git` in any letter case; the HFS+ spellings with ignorable code points
/// (`.g\u{200C}it`, `.git\u{FEFF}`); and the NTFS spellings: trailing dots or spaces (`.git.`,
/// `.git `), an alternate data stream (`.git::$INDEX_ALLOCATION`) and the short name `git~1`. A
/// `\` counts as a separator, as git counts it on NTFS, so `x\.git` is refused too. Near
/// misses are not: `.github`, `.gitignore`, `.gitmodules`, `git`, `a.git`.
///
/// Index output naming such a file would show the repository's configuration (remote URLs may
/// carry credentials), so [`check_path`] refuses it, and a file walker can call this on each
/// directory entry to never descend into one.
pub fn is_git_internal_segment(segment: &str) -> bool {
    segment
        .split('\\')
        .any(|name| is_hfs_dotgit(name) || is_ntfs_dotgit(name))
}

/// Checks that `path` is a canonical repo-relative path: non-empty, bounded, `/`-separated, with
/// no absolute or drive prefix, no backslash, NUL or control character, no empty, `.` or `..`
/// segment, no segment naming git's own data ([`is_git_internal_segment`]), no invisible or
/// bidirectional character, and no look-alike that changes the path's structure once normalised
/// (NFKC) or read by eye (the UTS #39 confusables of `/`, `\` and `.`).
///
/// Being canonical is what makes it contained: with no way to go up and no way to start at a
/// root, every such path names something under the root. Odd but honest names pass: `..test`,
/// `a..b`, `...`, `.env.`, `%2e%2e`, spaces, non-ASCII, a fullwidth colon or full stop inside a
/// name, an ellipsis.
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
    if has_drive_prefix(path) {
        return Err(PathRejection::DrivePrefix);
    }
    for c in path.chars() {
        match c {
            '\\' => return Err(PathRejection::Backslash),
            '\0' => return Err(PathRejection::Nul),
            c if c.is_control() => return Err(PathRejection::ControlCharacter),
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
    // Before the invisible-character rule, so that `.g\u{200C}it` is reported for what it is.
    if path.split('/').any(is_git_internal_segment) {
        return Err(PathRejection::GitInternal);
    }
    if is_lookalike_path(path) {
        return Err(PathRejection::Lookalike);
    }
    Ok(())
}

/// Whether `path` reads as something it is not: it holds an invisible or bidirectional
/// character, or a segment that a look-alike of `/`, `\` or `.` turns into another structure
/// ([`PathRejection::Lookalike`]). [`check_path`] refuses such a path; the literal search, which
/// reads names from the disk rather than from an index, withholds exactly these, whatever else
/// the name holds.
pub fn is_lookalike_path(path: &str) -> bool {
    if path.chars().any(is_invisible) {
        return true;
    }
    let mut segments = path.split('/').peekable();
    let mut first = true;
    while let Some(segment) = segments.next() {
        if spoofs_structure(segment, first, segments.peek().is_some()) {
            return true;
        }
        first = false;
    }
    false
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
