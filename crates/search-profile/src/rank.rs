//! Ranking a hit: its path's prior and the shape of its match, one rule for every backend, so
//! that the same hit scores the same whichever backend found it.

/// A path's prior: ordinary source first; tests, docs, vendored and generated code later; deeper
/// paths slightly later.
///
/// It comes in 255 steps, as an index stores it in a byte, and a score is always computed from the
/// step: a backend that stores the prior and one that computes it from the path give the same
/// score.
///
/// # Example
///
/// ```
/// use search_profile::rank::Prior;
///
/// assert!(Prior::of("src/lib.rs") > Prior::of("tests/lib.rs"));
/// assert!(Prior::of("tests/lib.rs") > Prior::of("vendor/tests/lib.rs"));
/// assert_eq!(Prior::from_step(Prior::of("src/lib.rs").step()), Prior::of("src/lib.rs"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prior(u8);

impl Prior {
    /// The prior of `path` (repo-relative, `/`-separated), in 1..=255 steps.
    pub fn of(path: &str) -> Prior {
        Prior((exact_prior(path) * 255.0).round().clamp(1.0, 255.0) as u8)
    }

    /// A prior an index stored as [`Prior::step`].
    pub fn from_step(step: u8) -> Prior {
        Prior(step)
    }

    /// The step, as an index stores it: 1..=255 for a prior of a path.
    pub fn step(self) -> u8 {
        self.0
    }

    /// The prior as a number in `[0, 1]`: the step over 255.
    pub fn value(self) -> f64 {
        f64::from(self.0) / 255.0
    }
}

/// The prior before it is put in steps, in (0, 1].
fn exact_prior(path: &str) -> f64 {
    let lower = path.to_ascii_lowercase();
    let mut p: f64 = 1.0;
    let has = |names: &[&str]| lower.split('/').any(|seg| names.contains(&seg));
    if has(&["vendor", "third_party", "node_modules", "external"])
        || lower.contains(".min.")
        || lower.contains("generated")
    {
        p *= 0.4;
    }
    if has(&["test", "tests", "testing", "selftests"])
        || lower.contains("_test.")
        || lower.contains(".test.")
        || lower.contains("spec")
    {
        p *= 0.6;
    }
    if has(&["docs", "doc", "documentation"])
        || lower.ends_with(".md")
        || lower.ends_with(".txt")
        || lower.ends_with(".rst")
    {
        p *= 0.8;
    }
    let depth = path.matches('/').count() as f64;
    p / (1.0 + 0.03 * depth)
}

/// How a match looks: whether it is a whole word, and whether its line looks like a definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchShape {
    /// No word character (ASCII letter, digit, `_`) touches the match on either side.
    pub whole_word: bool,
    /// The line, from its first non-blank character, starts with a definition keyword (`fn `,
    /// `class `, `#define `, …).
    pub definition: bool,
}

impl MatchShape {
    /// The best shape a match can have: a whole word on a definition's line.
    pub const BEST: MatchShape = MatchShape {
        whole_word: true,
        definition: true,
    };

    /// The shape of the match at `start..end` of `line`.
    ///
    /// # Example
    ///
    /// ```
    /// use search_profile::rank::MatchShape;
    ///
    /// let line = b"    pub fn parse_config() {";
    /// assert_eq!(MatchShape::of(line, 11, 23), MatchShape::BEST);
    /// assert!(!MatchShape::of(line, 11, 16).whole_word);
    /// ```
    pub fn of(line: &[u8], start: usize, end: usize) -> MatchShape {
        let word = |b: Option<&u8>| b.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
        let whole_word =
            !word(start.checked_sub(1).and_then(|i| line.get(i))) && !word(line.get(end));
        let before = String::from_utf8_lossy(&line[..start.min(line.len())]);
        let head = before.trim_start();
        MatchShape {
            whole_word,
            definition: DEFINITION_KEYWORDS.iter().any(|k| head.starts_with(k)),
        }
    }
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

/// A hit's score in [0, 1]: half the path prior, half how the match looks (a whole word on a
/// definition's line 1, a whole word 0.7, a definition 0.6, otherwise 0.4).
pub fn score(prior: Prior, shape: MatchShape) -> f64 {
    let quality = match (shape.whole_word, shape.definition) {
        (true, true) => 1.0,
        (true, false) => 0.7,
        (false, true) => 0.6,
        (false, false) => 0.4,
    };
    (0.5 * prior.value() + 0.5 * quality).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::{MatchShape, Prior, score};

    #[test]
    fn shapes_of_matches() {
        let check = |line: &str, q: &str, expected: (bool, bool)| {
            let start = line.find(q).unwrap();
            let got = MatchShape::of(line.as_bytes(), start, start + q.len());
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
        check("\t#define MAX 4", "MAX", (true, true));
        check("let x_max = 4;", "max", (false, true));
    }

    /// Each rule of the prior, by the step a path gets: depth costs 3 % a level, vendored or
    /// generated code × 0.4, tests × 0.6, docs × 0.8.
    #[test]
    fn each_prior_rule_gives_its_step() {
        let check = |path: &str, expected: u8| {
            assert_eq!(Prior::of(path).step(), expected, "{path}");
        };
        check("lib.rs", 255);
        check("src/lib.rs", 248);
        check("a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x.rs", 151);
        check("vendor/x.c", 99);
        check("Third_Party/x.c", 99);
        check("node_modules/x.js", 99);
        check("external/x.c", 99);
        check("x.min.js", 102);
        check("src/generated_tables.rs", 99);
        check("test/x.c", 149);
        check("tests/x.c", 149);
        check("testing/x.c", 149);
        check("selftests/x.c", 149);
        check("src/x_test.go", 149);
        check("src/x.test.ts", 149);
        check("spec/x.rb", 149);
        check("src/x_spec.rb", 149);
        check("docs/x.c", 198);
        check("doc/x.c", 198);
        check("documentation/x.c", 198);
        check("README.md", 204);
        check("notes.txt", 204);
        check("src/x.rst", 198);
        check("vendor/tests/docs/x.md", 45);
        // Only whole directory names count: these are ordinary source.
        check("contest/x.c", 248);
        check("src/vendored.rs", 248);
    }

    #[test]
    fn a_score_is_half_the_stepped_prior_and_half_the_shape() {
        let check = |path: &str, shape: (bool, bool), expected: f64| {
            let shape = MatchShape {
                whole_word: shape.0,
                definition: shape.1,
            };
            let got = score(Prior::of(path), shape);
            assert!((got - expected).abs() < 1e-12, "{path} {shape:?}: {got}");
        };
        check("lib.rs", (true, true), 1.0);
        check("lib.rs", (true, false), 0.85);
        check("lib.rs", (false, true), 0.8);
        check("lib.rs", (false, false), 0.7);
        check("src/lib.rs", (true, true), 0.5 * 248.0 / 255.0 + 0.5);
        check("selftests/x.c", (true, false), 0.5 * 149.0 / 255.0 + 0.35);
    }
}
