//! Prose documents: Markdown, reStructuredText, AsciiDoc and plain text files, which describe
//! code in words and so share a question's words more readily than the code that answers it.
//!
//! A question asks where something is done or how it works; the answer is the code that does it.
//! A guide that tells of the same thing ranks after that code, unless the question asks for
//! for a document in its own words (`readme`, `guide`, `documented`, …). The rule lowers a document's
//! path prior by [`PROSE_PRIOR`]; it hides nothing.
//!
//! This module only reads paths and the question's words; the store decides which files it asks
//! about (the head of a ranking, `Store::lower_by_path`).

use std::collections::HashSet;

/// What a prose document's path prior is multiplied by, when the question does not ask for
/// one. Chosen on semble's questions (docs/semantic-design.md, "Prose documents, and a file of
/// one chunk"): beside the lone chunk's share the mean NDCG@10 was 0.871 at each of 0.6, 0.4 and
/// 0.2, against 0.868 at 1 (no rule).
pub const PROSE_PRIOR: f32 = 0.6;

/// The file extensions of prose, lower case.
const PROSE_EXTENSIONS: &[&str] = &["md", "markdown", "mdx", "rst", "adoc", "asciidoc", "txt"];

/// Words by which a question asks for a document itself. Words such as `docs`, `documentation`,
/// `markdown` or `manual` are left out: a question names them as often as the subject of code
/// ("documentation generation for man pages and markdown" asks for the generator).
const ASKING_FOR_PROSE: &[&str] = &[
    "readme",
    "changelog",
    "documented",
    "tutorial",
    "guide",
    "faq",
];

/// The prose rule for one question.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Prose {
    /// Whether the question asks for documentation, so that no document is lowered.
    asked: bool,
}

impl Prose {
    /// The rule for `query`.
    pub(crate) fn new(query: &str) -> Prose {
        let words: HashSet<String> = crate::text::identifier_words(query).into_iter().collect();
        Prose {
            asked: ASKING_FOR_PROSE.iter().any(|w| words.contains(*w)),
        }
    }

    /// What the prior of `path` (a repo-relative path's bytes) is multiplied by: [`PROSE_PRIOR`]
    /// for a prose document the question does not ask for, else 1.
    pub(crate) fn prior(self, path: &[u8]) -> f32 {
        if !self.asked && is_prose(path) {
            PROSE_PRIOR
        } else {
            1.0
        }
    }
}

/// Whether `path`'s file name ends in a prose extension, in any case.
fn is_prose(path: &[u8]) -> bool {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let Some(dot) = name.iter().rposition(|&b| b == b'.') else {
        return false;
    };
    // A leading dot names a hidden file, not an extension (`.txt` is a file called `.txt`).
    dot > 0
        && PROSE_EXTENSIONS
            .iter()
            .any(|e| name[dot + 1..].eq_ignore_ascii_case(e.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::{PROSE_PRIOR, Prose};

    /// Checks which of `paths` the rule lowers for `query`.
    fn check(query: &str, paths: &[&str], expected: &[&str]) {
        let rule = Prose::new(query);
        let got: Vec<&str> = paths
            .iter()
            .copied()
            .filter(|p| rule.prior(p.as_bytes()) < 1.0)
            .collect();
        assert_eq!(got, expected, "{query}");
    }

    const PATHS: &[&str] = &[
        "README.md",
        "docs/user_guide.MD",
        "doc/api.rst",
        "NOTES.txt",
        "manual.adoc",
        "lib/rack/urlmap.rb",
        "docs/conf.py",
        "src/md.rs",
        "markdown/parse.go",
        ".txt",
        "Makefile",
    ];

    #[test]
    fn prose_documents_rank_after_code_for_a_question_about_code() {
        check(
            "documentation generation for man pages and markdown",
            PATHS,
            &[
                "README.md",
                "docs/user_guide.MD",
                "doc/api.rst",
                "NOTES.txt",
                "manual.adoc",
            ],
        );
        assert_eq!(Prose::new("x").prior(b"README.md"), PROSE_PRIOR);
    }

    #[test]
    fn a_question_that_asks_for_a_document_lowers_none() {
        check("where the README explains installation", PATHS, &[]);
        check("user guide for flags", PATHS, &[]);
        check("where is the router documented", PATHS, &[]);
    }
}
