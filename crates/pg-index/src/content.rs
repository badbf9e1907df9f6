//! What a file becomes in a row, and what a query becomes in SQL.

use search_profile::rank::Prior;

/// A file's row values: the text a match can be found in, its words (what the trigram index
/// sees), and the exact bytes when they differ from the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) content: String,
    pub(crate) words: String,
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
    let (content, raw) = text_and_raw(bytes);
    Stored {
        words: words(&content),
        content,
        raw,
    }
}

fn text_and_raw(bytes: Vec<u8>) -> (String, Option<Vec<u8>>) {
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
        return (content, Some(bytes));
    }
    match String::from_utf8(bytes) {
        Ok(s) if !s.contains('\0') => (s, None),
        Ok(s) => (s.replace('\0', "\u{FFFD}"), Some(s.into_bytes())),
        Err(e) => {
            let bytes = e.into_bytes();
            let content = String::from_utf8_lossy(&bytes).replace('\0', "\u{FFFD}");
            (content, Some(bytes))
        }
    }
}

/// The text a row's `path` holds for the walk name `name` (`search_profile::walk_name`): the
/// name itself, except that each NUL escaping a byte of a name that is not UTF-8 becomes `//`,
/// since PostgreSQL text cannot hold a NUL. A selected path never holds `//`, so such a row
/// cannot collide with a UTF-8 name, and the trust gate refuses its empty segment, so no answer
/// names it.
pub(crate) fn stored_path(name: &str) -> std::borrow::Cow<'_, str> {
    if search_profile::is_non_utf8_name(name) {
        std::borrow::Cow::Owned(name.replace('\0', "//"))
    } else {
        std::borrow::Cow::Borrowed(name)
    }
}

/// The walk name a row's `path` stands for: the inverse of [`stored_path`]. An escape is always
/// followed by hex digits, never by a `/`, so a run of two slashes is a NUL, and a run of three
/// is a separator followed by one. Longer runs come from no walk name and are kept.
pub(crate) fn walk_name(stored: &str) -> std::borrow::Cow<'_, str> {
    if !stored.contains("//") {
        return std::borrow::Cow::Borrowed(stored);
    }
    let mut out = String::with_capacity(stored.len());
    let mut rest = stored;
    while let Some(at) = rest.find('/') {
        out.push_str(&rest[..at]);
        let run = rest[at..].bytes().take_while(|&b| b == b'/').count();
        match run {
            2 => out.push('\0'),
            3 => out.push_str("/\0"),
            n => out.push_str(&"/".repeat(n)),
        }
        rest = &rest[at + run..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// The path with each `/` as a zero byte: byte order on it is the component-wise path order
/// (`search_profile::PathKey`), since no name holds a zero byte.
pub(crate) fn sort_key(path: &str) -> Vec<u8> {
    path.bytes()
        .map(|b| if b == b'/' { 0 } else { b })
        .collect()
}

/// A text's distinct words, as the `words` column holds them for the trigram index: every
/// maximal run of ASCII letters and digits, once, in order of first appearance, with a space
/// before and after each (`" fn main parse config "`).
///
/// `pg_trgm` makes trigrams only within words, so this text has the same trigrams as the file
/// when its words are ASCII, at about an eighth of the bytes to extract them from (measured on
/// Linux: 0.12 of the content). The runs are ASCII so that migration 3 computes the same column
/// in SQL, whatever the database's locale: other characters separate words here, as under a `C`
/// ctype.
pub(crate) fn words(text: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut out = String::with_capacity(text.len() / 8 + 2);
    out.push(' ');
    for run in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|r| !r.is_empty())
    {
        if seen.insert(run) {
            out.push_str(run);
            out.push(' ');
        }
    }
    if out.len() == 1 {
        out.push(' ');
    }
    out
}

/// What `words` must contain for a file to hold a match: a run of word characters, with the
/// space before or after it where the query bounds the run (` parse `, ` config`). It has no
/// `LIKE` wildcard and no backslash, so it is the same as a `LIKE` pattern (`%text%`) and as a
/// `strpos` needle.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct WordPattern(String);

impl WordPattern {
    /// The text `words` must contain.
    pub(crate) fn text(&self) -> &str {
        &self.0
    }

    /// As a `LIKE` pattern.
    pub(crate) fn like(&self) -> String {
        format!("%{}%", self.0)
    }
}

/// What one character of a query says about the words of a file that holds a match.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// It is part of a word: it matches only itself (or, under `ILIKE`, its ASCII case variant).
    Word,
    /// It matches only characters that separate words.
    Separator,
    /// It may match a word character or a separator: under case folding, `k` matches the Kelvin
    /// sign and `é` matches `É`, which `words` does not hold.
    Unknown,
}

fn class(c: char, case_insensitive: bool) -> Class {
    let sure = !case_insensitive || keeps_its_case_variants(c);
    match (c.is_ascii_alphanumeric(), sure) {
        (true, true) => Class::Word,
        (false, true) => Class::Separator,
        (_, false) => Class::Unknown,
    }
}

/// The SQL pre-filter for a string every match contains: `LIKE` (or `ILIKE`) patterns on the
/// `words` column that every file holding the string satisfies, only those that give `pg_trgm`
/// a trigram. None when the string gives no trigram at all.
///
/// Each run of word characters in the string lies within one of the file's words. Where the
/// string itself bounds the run (a separator before or after it), the file's word starts or
/// ends there too, so the pattern carries the space `words` puts there (`fn parse_config` →
/// `% fn %`, `% parse %`, `% config%`); at the string's edges the word may go on. `pg_trgm` pads
/// a bounded word's start with two spaces and its end with one, so a run gives a trigram when
/// its length with that padding is at least three.
///
/// Case-insensitive matching is Unicode simple case folding, and `ILIKE` follows the database's
/// locale, which may fold differently. So only characters whose case variants `ILIKE` surely
/// covers are taken as they are: ASCII letters other than `k` and `s` (each has a non-ASCII
/// variant: the Kelvin sign, the long s) and characters without case. Any other character ends
/// a run without bounding it.
pub(crate) fn word_patterns(s: &str, case_insensitive: bool) -> Vec<WordPattern> {
    let mut patterns = Vec::new();
    let mut run = String::new();
    let mut bounded_before = false;
    let mut previous = Class::Unknown;
    let mut close = |run: &mut String, before: bool, after: bool| {
        let padded = run.len() + 2 * usize::from(before) + usize::from(after);
        if !run.is_empty() && padded >= 3 {
            let (b, a) = (if before { " " } else { "" }, if after { " " } else { "" });
            patterns.push(WordPattern(format!("{b}{run}{a}")));
        }
        run.clear();
    };
    for c in s.chars() {
        let class = class(c, case_insensitive);
        if class == Class::Word {
            if run.is_empty() {
                bounded_before = previous == Class::Separator;
            }
            run.push(c);
        } else {
            close(&mut run, bounded_before, class == Class::Separator);
        }
        previous = class;
    }
    close(&mut run, bounded_before, false);
    patterns
}

fn keeps_its_case_variants(c: char) -> bool {
    if c.is_ascii() {
        return !matches!(c, 'k' | 'K' | 's' | 'S');
    }
    let same = |it: &mut dyn Iterator<Item = char>| it.next() == Some(c) && it.next().is_none();
    same(&mut c.to_lowercase()) && same(&mut c.to_uppercase())
}

/// The `prior` column of a row: the shared rank's prior of its path ([`Prior`]). Searches do not
/// read it; they take the prior of the path itself, so that a row written under another rule
/// scores as every backend scores it.
pub(crate) fn prior_column(path: &str) -> f32 {
    Prior::of(path).value() as f32
}

#[cfg(test)]
mod tests {
    use super::{sort_key, stored, stored_path, walk_name, word_patterns, words};

    #[test]
    fn word_patterns_bound_what_the_query_bounds_and_keep_only_safe_letters_under_case_folding() {
        let check = |q: &str, ci: bool, expected: &[&str]| {
            let likes: Vec<String> = word_patterns(q, ci).iter().map(|p| p.like()).collect();
            assert_eq!(likes, expected, "{q:?} ci={ci}");
        };
        check("parse_config", false, &["%parse %", "% config%"]);
        check(
            "fn parse_config(",
            false,
            &["%fn %", "% parse %", "% config %"],
        );
        check("50%", false, &["%50 %"]);
        check("->", false, &[]);
        check("a->b", false, &["% b%"]);
        check("x->next", false, &["% next%"]);
        check("Kelvin", true, &["%elvin%"]);
        check("kes", true, &[]);
        check("Straße", true, &["%tra%"]);
        check("Straße", false, &["%Stra %", "% e%"]);
        check("日本語", false, &[]);
        check("café au", true, &["%caf%", "% au%"]);
        check("café au", false, &["%caf %", "% au%"]);
        check("Kvm_setup", true, &["%vm %", "%etup%"]);
    }

    #[test]
    fn words_are_the_distinct_ascii_runs_between_spaces() {
        assert_eq!(words("fn main() { main(); x_1 }"), " fn main x 1 ");
        assert_eq!(words("-> :: ;"), "  ");
        assert_eq!(words(""), "  ");
        assert_eq!(words("café naïve"), " caf na ve ");
    }

    /// A deterministic generator, so a failure names its case.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Every string a file holds, and every case variant of it under case folding, passes the
    /// pre-filter on that file's words: `LIKE` is a substring test on `words` here, `ILIKE` one
    /// that folds ASCII case, which is all either does with these patterns.
    #[test]
    fn every_match_survives_the_word_prefilter() {
        const CHARS: &[char] = &[
            'a', 'b', 'k', 'K', 's', 'S', 'z', '1', '_', ' ', '(', '\u{212A}', '\u{17F}', 'é', 'É',
            '日', '\n', '%',
        ];
        // The case variants simple case folding matches: ASCII letters both ways, and the
        // Kelvin sign and long s with `k` and `s`.
        let variants = |c: char| -> Vec<char> {
            match c {
                'k' | 'K' | '\u{212A}' => vec!['k', 'K', '\u{212A}'],
                's' | 'S' | '\u{17F}' => vec!['s', 'S', '\u{17F}'],
                'é' | 'É' => vec!['é', 'É'],
                c if c.is_ascii_alphabetic() => {
                    vec![c.to_ascii_lowercase(), c.to_ascii_uppercase()]
                }
                c => vec![c],
            }
        };
        let mut state = 0x5eed_u64;
        let mut checked = 0;
        for _ in 0..300 {
            let len = 1 + next(&mut state) as usize % 40;
            let text: Vec<char> = (0..len)
                .map(|_| CHARS[next(&mut state) as usize % CHARS.len()])
                .collect();
            let stored_words = words(&text.iter().collect::<String>());
            let folded = stored_words.to_ascii_lowercase();
            for i in 0..len {
                for j in i + 1..=len {
                    let exact: String = text[i..j].iter().collect();
                    for p in word_patterns(&exact, false) {
                        assert!(
                            stored_words.contains(p.text()),
                            "{exact:?} {p:?} {stored_words:?}"
                        );
                        checked += 1;
                    }
                    let variant: String = text[i..j]
                        .iter()
                        .map(|&c| {
                            let v = variants(c);
                            v[next(&mut state) as usize % v.len()]
                        })
                        .collect();
                    for p in word_patterns(&variant, true) {
                        assert!(
                            folded.contains(&p.text().to_ascii_lowercase()),
                            "{variant:?} {p:?} {stored_words:?}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000, "only {checked} patterns checked");
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
    fn names_that_are_not_utf8_are_stored_without_a_nul_and_read_back_exactly() {
        let check = |raw: &[u8], expected: &str| {
            let name = search_profile::walk_name(raw);
            let stored = stored_path(&name);
            assert_eq!(stored, expected, "{raw:?}");
            assert!(!stored.contains('\0'));
            assert_eq!(walk_name(&stored), name, "{raw:?}");
            assert_eq!(
                index_guard::check_path(&stored).is_ok(),
                std::str::from_utf8(raw).is_ok(),
                "{raw:?}"
            );
        };
        check(b"src/main.rs", "src/main.rs");
        check(b"bad\xff.txt", "bad//ff.txt");
        check(b"a/\xff", "a///ff");
        check(b"\xff/b", "//ff/b");
        check(b"a\xfe/\xff/c\xfd", "a//fe///ff/c//fd");
        check(b"\xff\xfe", "//ff//fe");
    }

    #[test]
    fn sort_keys_order_paths_component_by_component() {
        let mut paths = vec!["a-b", "a/b", "a", "a/a/z", "b"];
        paths.sort_by_key(|p| sort_key(p));
        assert_eq!(paths, ["a", "a/a/z", "a/b", "a-b", "b"]);
    }
}
