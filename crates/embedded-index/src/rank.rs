//! Ranking: a path prior and the shape of a file's first match.

/// A path's prior: ordinary source first; tests, docs, vendored and generated code later; deeper
/// paths slightly later. In (0, 1].
pub(crate) fn prior(path: &str) -> f64 {
    let lower = path.to_ascii_lowercase();
    let mut p: f64 = 1.0;
    let has = |needle: &str| lower.split('/').any(|seg| seg == needle);
    if has("vendor")
        || has("third_party")
        || has("node_modules")
        || has("external")
        || lower.contains(".min.")
        || lower.contains("generated")
    {
        p *= 0.4;
    }
    if has("test")
        || has("tests")
        || has("testing")
        || has("selftests")
        || lower.contains("_test.")
        || lower.contains(".test.")
        || lower.contains("spec")
    {
        p *= 0.6;
    }
    if has("docs")
        || has("doc")
        || has("documentation")
        || lower.ends_with(".md")
        || lower.ends_with(".txt")
        || lower.ends_with(".rst")
    {
        p *= 0.8;
    }
    let depth = path.matches('/').count() as f64;
    p / (1.0 + 0.03 * depth)
}

/// [`prior`] quantized to 1..=255, as segments store it.
pub(crate) fn quantized_prior(path: &str) -> u8 {
    (prior(path) * 255.0).round().clamp(1.0, 255.0) as u8
}

/// How a match looks: whether it is a whole word, and whether its line looks like a definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MatchShape {
    pub(crate) whole_word: bool,
    pub(crate) definition: bool,
}

const DEFINITION_KEYWORDS: &[&str] = &[
    "fn ",
    "pub fn ",
    "pub(crate) fn ",
    "def ",
    "class ",
    "struct ",
    "pub struct ",
    "enum ",
    "pub enum ",
    "trait ",
    "pub trait ",
    "impl ",
    "type ",
    "func ",
    "interface ",
    "#define ",
    "static ",
    "const ",
    "let ",
    "var ",
];

/// The shape of the match at `start..end` of `line`.
pub(crate) fn shape(line: &[u8], start: usize, end: usize) -> MatchShape {
    let word = |b: Option<&u8>| b.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
    let whole_word = !word(start.checked_sub(1).and_then(|i| line.get(i))) && !word(line.get(end));
    let before = String::from_utf8_lossy(&line[..start.min(line.len())]);
    let head = before.trim_start();
    MatchShape {
        whole_word,
        definition: DEFINITION_KEYWORDS.iter().any(|k| head.starts_with(k)),
    }
}

/// A hit's score in [0, 1]: half the path prior, half how the match looks.
pub(crate) fn score(prior: f64, shape: MatchShape) -> f64 {
    let quality = match (shape.whole_word, shape.definition) {
        (true, true) => 1.0,
        (true, false) => 0.7,
        (false, true) => 0.6,
        (false, false) => 0.4,
    };
    (0.5 * prior + 0.5 * quality).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::{MatchShape, quantized_prior, shape};

    #[test]
    fn shapes_of_matches() {
        let check = |line: &str, q: &str, expected: (bool, bool)| {
            let start = line.find(q).unwrap();
            let got = shape(line.as_bytes(), start, start + q.len());
            assert_eq!(
                got,
                MatchShape {
                    whole_word: expected.0,
                    definition: expected.1
                },
                "{line}"
            );
        };
        check("fn parse_config() {", "parse_config", (true, true));
        check("    parse_config();", "parse_config", (true, false));
        check("fn parse_config_all() {", "parse_config", (false, true));
        check("x = reparse_config", "parse_config", (false, false));
    }

    #[test]
    fn priors_prefer_source_over_tests_docs_and_vendored_code() {
        let src = quantized_prior("src/lib.rs");
        assert!(src > quantized_prior("tests/lib.rs"));
        assert!(src > quantized_prior("docs/lib.md"));
        assert!(quantized_prior("tests/lib.rs") > quantized_prior("vendor/tests/lib.rs"));
        assert!(quantized_prior("a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x.rs") >= 1);
    }
}
