//! What a file becomes in a row, and what a query becomes in SQL.

/// A file's row values: the text the trigram index sees, and the exact bytes when they differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) content: String,
    pub(crate) raw: Option<Vec<u8>>,
}

/// The text a match can be found in, for the pre-filter, and the bytes for verification.
///
/// The text must contain every match the shared searcher can find in the bytes, so that the SQL
/// pre-filter never drops a real hit. A match of a UTF-8 query is valid UTF-8 and contains no
/// NUL, so replacing invalid sequences and NULs (which PostgreSQL text cannot hold) keeps every
/// match; a file with a UTF-16 byte-order mark is searched transcoded, so its text is the
/// transcoded text.
pub(crate) fn stored(bytes: Vec<u8>) -> Stored {
    let utf16 = match bytes.get(..2) {
        Some([0xFF, 0xFE]) => Some(u16::from_le_bytes as fn([u8; 2]) -> u16),
        Some([0xFE, 0xFF]) => Some(u16::from_be_bytes as fn([u8; 2]) -> u16),
        _ => None,
    };
    if let Some(unit) = utf16 {
        let units = bytes[2..].chunks_exact(2).map(|c| unit([c[0], c[1]]));
        let content: String = char::decode_utf16(units)
            .map(|c| match c {
                Ok('\0') | Err(_) => char::REPLACEMENT_CHARACTER,
                Ok(c) => c,
            })
            .collect();
        return Stored {
            content,
            raw: Some(bytes),
        };
    }
    match String::from_utf8(bytes) {
        Ok(s) if !s.contains('\0') => Stored {
            content: s,
            raw: None,
        },
        Ok(s) => Stored {
            content: s.replace('\0', "\u{FFFD}"),
            raw: Some(s.into_bytes()),
        },
        Err(e) => {
            let bytes = e.into_bytes();
            Stored {
                content: String::from_utf8_lossy(&bytes).replace('\0', "\u{FFFD}"),
                raw: Some(bytes),
            }
        }
    }
}

/// The path with each `/` as a zero byte: byte order on it is the component-wise path order
/// (`search_profile::PathKey`), since no name holds a zero byte.
pub(crate) fn sort_key(path: &str) -> Vec<u8> {
    path.bytes()
        .map(|b| if b == b'/' { 0 } else { b })
        .collect()
}

/// The SQL pre-filter for a fixed-string query: a `LIKE` (or `ILIKE`) pattern, and whether it
/// holds a run of three word characters, which is what lets `pg_trgm` narrow the candidates.
///
/// Case-insensitive matching is Unicode simple case folding, and `ILIKE` follows the database's
/// locale, which may fold differently. So only characters whose case variants `ILIKE` surely
/// covers are kept: ASCII letters other than `k` and `s` (each has a non-ASCII variant: the
/// Kelvin sign, the long s) and characters without case. Every other character becomes `_`,
/// which matches any one character; simple folding maps one character to one, so the pattern
/// still covers every match.
pub(crate) fn like_pattern(query: &str, case_insensitive: bool) -> (String, bool) {
    let mut pattern = String::with_capacity(query.len() + 2);
    pattern.push('%');
    let (mut run, mut longest) = (0usize, 0usize);
    for c in query.chars() {
        let kept = !case_insensitive || keeps_its_case_variants(c);
        match c {
            _ if !kept => pattern.push('_'),
            '%' | '_' | '\\' => {
                pattern.push('\\');
                pattern.push(c);
            }
            _ => pattern.push(c),
        }
        run = if kept && c.is_alphanumeric() {
            run + 1
        } else {
            0
        };
        longest = longest.max(run);
    }
    pattern.push('%');
    (pattern, longest >= 3)
}

fn keeps_its_case_variants(c: char) -> bool {
    if c.is_ascii() {
        return !matches!(c, 'k' | 'K' | 's' | 'S');
    }
    let same = |it: &mut dyn Iterator<Item = char>| it.next() == Some(c) && it.next().is_none();
    same(&mut c.to_lowercase()) && same(&mut c.to_uppercase())
}

/// A path's prior: ordinary source first, then docs, tests and vendored or generated code, and
/// deeper paths slightly later. In (0, 1]. Scores are informative here: hits come in path order.
pub(crate) fn prior(path: &str) -> f32 {
    let lower = path.to_ascii_lowercase();
    let has = |names: &[&str]| lower.split('/').any(|seg| names.contains(&seg));
    let mut p = 1.0f32;
    if has(&["vendor", "third_party", "node_modules"]) || lower.contains("generated") {
        p *= 0.4;
    }
    if has(&["test", "tests", "testing"]) || lower.contains("_test.") {
        p *= 0.6;
    }
    if has(&["doc", "docs"]) || lower.ends_with(".md") || lower.ends_with(".txt") {
        p *= 0.8;
    }
    p / (1.0 + 0.03 * path.matches('/').count() as f32)
}

/// A hit's score in [0, 1]: half the prior, half whether the match is a whole word.
pub(crate) fn score(prior: f32, line: &[u8], start: usize, end: usize) -> f64 {
    let word = |b: Option<&u8>| b.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
    let whole = !word(start.checked_sub(1).and_then(|i| line.get(i))) && !word(line.get(end));
    (0.5 * f64::from(prior) + if whole { 0.5 } else { 0.25 }).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::{like_pattern, sort_key, stored};

    #[test]
    fn like_patterns_escape_wildcards_and_keep_only_safe_letters_under_case_folding() {
        let check = |q: &str, ci: bool, expected: (&str, bool)| {
            let (p, trigram) = like_pattern(q, ci);
            assert_eq!((p.as_str(), trigram), expected, "{q:?} ci={ci}");
        };
        check("parse_config", false, ("%parse\\_config%", true));
        check("50%", false, ("%50\\%%", false));
        check("a\\b", false, ("%a\\\\b%", false));
        check("->", false, ("%->%", false));
        check("Kelvin", true, ("%_elvin%", true));
        check("kes", true, ("%_e_%", false));
        check("Straße", true, ("%_tra_e%", true));
        check("日本語", true, ("%日本語%", true));
        check("café", true, ("%caf_%", true));
        check("café", false, ("%café%", true));
    }

    #[test]
    fn stored_text_keeps_every_possible_match() {
        let check = |bytes: &[u8], content: &str, raw: bool| {
            let s = stored(bytes.to_vec());
            assert_eq!(
                (s.content.as_str(), s.raw.is_some()),
                (content, raw),
                "{bytes:?}"
            );
            if let Some(r) = s.raw {
                assert_eq!(r, bytes);
            }
        };
        check(b"fn main\n", "fn main\n", false);
        check(b"caf\xe9 fn main\n", "caf\u{FFFD} fn main\n", true);
        check(b"a\x00fn main", "a\u{FFFD}fn main", true);
        check(b"\xff\xfef\x00n\x00", "fn", true);
        check(b"\xfe\xff\x00f\x00n", "fn", true);
    }

    #[test]
    fn sort_keys_order_paths_component_by_component() {
        let mut paths = vec!["a-b", "a/b", "a", "a/a/z", "b"];
        paths.sort_by_key(|p| sort_key(p));
        assert_eq!(paths, ["a", "a/a/z", "a/b", "a-b", "b"]);
    }
}
