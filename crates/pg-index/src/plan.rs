//! The SQL pre-filter of a query: an AND/OR tree of `LIKE` (or `ILIKE`) patterns on the `words`
//! column that every file holding a match satisfies, so that the `pg_trgm` index narrows the
//! candidates.
//!
//! A fixed string is the patterns of its words (`content::word_patterns`). A regex is parsed as
//! ripgrep's matcher parses it (`search_profile::query_hir`) and each node is summarized, after
//! Russ Cox's trigram plan, by the exact set of strings it matches when that set is small, else
//! by a condition its matches imply: a concatenation needs each part's condition, an alternation
//! one of its branches', a repetition of at least one its operand's.
//! PostgreSQL's own `~` is not used: its regex dialect differs from ripgrep's, and a pre-filter
//! must never drop a real match. Verification with the shared profile decides every hit.

use std::collections::BTreeSet;

use regex_syntax::hir::{Class, Hir, HirKind};

use crate::content::{WordPattern, word_patterns};

/// The largest exact set a summary keeps; a bigger one becomes a condition.
const MAX_SET: usize = 16;
/// The most patterns a filter keeps: dropping parts of an AND only widens it, and an OR that
/// would grow past this is no condition at all.
const MAX_PATTERNS: usize = 24;
/// The most characters a class may hold to be expanded into exact strings.
const MAX_CLASS: u32 = 4;

/// How the SQL tests a word pattern on a row's `words`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WordTest {
    /// `LIKE` (or `ILIKE`): what the trigram index answers, and what it rechecks each candidate
    /// with.
    Like { case_insensitive: bool },
    /// `strpos`: the same test on rows read without the index (in path order). On Linux's
    /// 86 242 rows, one pattern took 255-276 ms by `strpos` against 510-526 ms by `LIKE`, and
    /// 365 ms case-insensitively against 1 156 ms by `ILIKE`: `LIKE` tries a match at every
    /// occurrence of the pattern's first character, `ILIKE` lowers through the locale.
    Position { case_insensitive: bool },
}

/// Which files may hold a match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Filter {
    /// Every file: the query gives no usable trigram.
    All,
    /// Files whose `words` contain this pattern, which holds a trigram.
    Word(WordPattern),
    /// Files satisfying every part (at least two, none `All`).
    And(Vec<Filter>),
    /// Files satisfying some part (at least two, none `All`).
    Or(Vec<Filter>),
}

impl Filter {
    fn and(parts: impl IntoIterator<Item = Filter>) -> Filter {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Filter::All => {}
                Filter::And(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        out.sort();
        out.dedup();
        // The longest patterns first: they select best, and the cut keeps them.
        out.sort_by_key(|f| std::cmp::Reverse(f.weight()));
        let mut kept = Vec::new();
        let mut total = 0;
        for f in out {
            if total + f.patterns() <= MAX_PATTERNS {
                total += f.patterns();
                kept.push(f);
            }
        }
        match kept.len() {
            0 => Filter::All,
            1 => kept.pop().unwrap_or(Filter::All),
            _ => Filter::And(kept),
        }
    }

    fn or(parts: impl IntoIterator<Item = Filter>) -> Filter {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Filter::All => return Filter::All,
                Filter::Or(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        out.sort();
        out.dedup();
        if out.iter().map(Filter::patterns).sum::<usize>() > MAX_PATTERNS {
            return Filter::All;
        }
        match out.len() {
            0 => Filter::All,
            1 => out.pop().unwrap_or(Filter::All),
            _ => Filter::Or(out),
        }
    }

    /// How many patterns the filter holds.
    fn patterns(&self) -> usize {
        match self {
            Filter::All => 0,
            Filter::Word(_) => 1,
            Filter::And(v) | Filter::Or(v) => v.iter().map(Filter::patterns).sum(),
        }
    }

    /// A rough selectivity: the length of the shortest pattern a file must hold.
    fn weight(&self) -> usize {
        match self {
            Filter::All => 0,
            Filter::Word(p) => p.text().len(),
            Filter::And(v) => v.iter().map(Filter::weight).max().unwrap_or(0),
            Filter::Or(v) => v.iter().map(Filter::weight).min().unwrap_or(0),
        }
    }

    /// The filter as an SQL condition on `words` with its patterns written in as literals, for
    /// statements that take no parameters.
    pub(crate) fn sql_literal(&self, test: WordTest) -> String {
        let mut params = Vec::new();
        let mut sql = self.sql(test, 1, &mut params);
        // From the highest number down, so that `$1` never rewrites the start of `$12`.
        for (i, p) in params.iter().enumerate().rev() {
            sql = sql.replace(&format!("${}", i + 1), &crate::literal(p));
        }
        sql
    }

    /// The filter as an SQL condition on `words`, its patterns bound from `$first` on.
    pub(crate) fn sql(&self, test: WordTest, first: usize, params: &mut Vec<String>) -> String {
        match self {
            Filter::All => "true".to_owned(),
            Filter::Word(p) => {
                let n = first + params.len();
                match test {
                    WordTest::Like { case_insensitive } => {
                        params.push(p.like());
                        let op = if case_insensitive { "ILIKE" } else { "LIKE" };
                        format!("words {op} ${n}")
                    }
                    // `words` is ASCII, which the C collation lowers byte by byte.
                    WordTest::Position {
                        case_insensitive: true,
                    } => {
                        params.push(p.text().to_ascii_lowercase());
                        format!("strpos(lower(words COLLATE \"C\"), ${n}) > 0")
                    }
                    WordTest::Position {
                        case_insensitive: false,
                    } => {
                        params.push(p.text().to_owned());
                        format!("strpos(words, ${n}) > 0")
                    }
                }
            }
            Filter::And(v) | Filter::Or(v) => {
                let join = if matches!(self, Filter::And(_)) {
                    " AND "
                } else {
                    " OR "
                };
                let parts: Vec<String> = v.iter().map(|f| f.sql(test, first, params)).collect();
                format!("({})", parts.join(join))
            }
        }
    }
}

/// The filter for `query`: a regex when `regex` is set, a fixed string otherwise. Under
/// `case_insensitive` the patterns are meant for `ILIKE`. A pattern the parser refuses (the
/// matcher refuses it too) is [`Filter::All`].
pub(crate) fn filter(query: &str, regex: bool, case_insensitive: bool) -> Filter {
    if !regex {
        return like(query, case_insensitive);
    }
    match search_profile::query_hir(query, true, case_insensitive) {
        Some(hir) => summarize(&hir, case_insensitive).into_filter(case_insensitive),
        None => Filter::All,
    }
}

/// What a file holding `s` satisfies: the patterns of its words, or no condition when they give
/// no trigram.
fn like(s: &str, case_insensitive: bool) -> Filter {
    Filter::and(
        word_patterns(s, case_insensitive)
            .into_iter()
            .map(Filter::Word),
    )
}

/// What the matches of one regex node look like.
struct Info {
    /// Every string the node matches (ASCII-lowercased under case-insensitive matching, where
    /// `ILIKE` finds every case variant the pattern keeps), when known and small.
    exact: Option<BTreeSet<String>>,
    /// Without `exact`: a condition every file holding a match satisfies.
    filter: Filter,
}

impl Info {
    fn exact(set: BTreeSet<String>) -> Info {
        Info {
            exact: Some(set),
            filter: Filter::All,
        }
    }

    fn anything() -> Info {
        Info {
            exact: None,
            filter: Filter::All,
        }
    }

    fn into_filter(self, ci: bool) -> Filter {
        match self.exact {
            Some(set) => Filter::or(set.iter().map(|s| like(s, ci))),
            None => self.filter,
        }
    }
}

fn summarize(hir: &Hir, ci: bool) -> Info {
    // Under `ILIKE` only ASCII case is surely folded (`word_patterns` takes other cased letters
    // as unknown), so only ASCII is lowercased, which keeps one character for one.
    let norm = |s: String| if ci { s.to_ascii_lowercase() } else { s };
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::exact(BTreeSet::from([String::new()])),
        // A match of bytes that are not UTF-8, or of a NUL, is not in the stored text as such.
        HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
            Ok(s) if !s.contains('\0') => Info::exact(BTreeSet::from([norm(s.to_owned())])),
            _ => Info::anything(),
        },
        HirKind::Class(class) => {
            let mut set = BTreeSet::new();
            let mut count = 0u32;
            match class {
                Class::Unicode(c) => {
                    for r in c.ranges() {
                        count += u32::from(r.end()) - u32::from(r.start()) + 1;
                        if count > MAX_CLASS {
                            return Info::anything();
                        }
                        set.extend((r.start()..=r.end()).map(|ch| norm(ch.to_string())));
                    }
                }
                Class::Bytes(c) => {
                    for r in c.ranges() {
                        count += u32::from(r.end()) - u32::from(r.start()) + 1;
                        if count > MAX_CLASS || !r.end().is_ascii() {
                            return Info::anything();
                        }
                        set.extend((r.start()..=r.end()).map(|b| norm(char::from(b).to_string())));
                    }
                }
            }
            if set.iter().any(|s| s.contains('\0')) {
                return Info::anything();
            }
            Info::exact(set)
        }
        HirKind::Capture(c) => summarize(&c.sub, ci),
        HirKind::Repetition(rep) => {
            let sub = summarize(&rep.sub, ci);
            match (rep.min, rep.max) {
                (1, Some(1)) => sub,
                (0, Some(1)) => match sub.exact {
                    Some(mut set) if set.len() < MAX_SET => {
                        set.insert(String::new());
                        Info::exact(set)
                    }
                    _ => Info::anything(),
                },
                (0, _) => Info::anything(),
                // At least one occurrence: whatever it implies holds.
                _ => Info {
                    exact: None,
                    filter: sub.into_filter(ci),
                },
            }
        }
        HirKind::Concat(parts) => concat(parts.iter().map(|p| summarize(p, ci)), ci),
        HirKind::Alternation(parts) => {
            let infos: Vec<Info> = parts.iter().map(|p| summarize(p, ci)).collect();
            if infos.iter().all(|i| i.exact.is_some()) {
                let union: BTreeSet<String> = infos
                    .iter()
                    .flat_map(|i| i.exact.iter().flatten().cloned())
                    .collect();
                if union.len() <= MAX_SET {
                    return Info::exact(union);
                }
            }
            Info {
                exact: None,
                filter: Filter::or(infos.into_iter().map(|i| i.into_filter(ci))),
            }
        }
    }
}

/// A concatenation: runs of exact parts are crossed while the product stays small, and each
/// run and each inexact part adds its condition.
fn concat(parts: impl Iterator<Item = Info>, ci: bool) -> Info {
    let mut filters = Vec::new();
    let mut run: Option<BTreeSet<String>> = None;
    for part in parts {
        let Some(set) = part.exact else {
            filters.extend(run.take().map(|r| Info::exact(r).into_filter(ci)));
            filters.push(part.filter);
            continue;
        };
        run = Some(match run.take() {
            Some(r) if r.len() * set.len() <= MAX_SET => r
                .iter()
                .flat_map(|p| set.iter().map(move |s| format!("{p}{s}")))
                .collect(),
            Some(r) => {
                filters.push(Info::exact(r).into_filter(ci));
                set
            }
            None => set,
        });
    }
    match run {
        Some(r) if filters.is_empty() => Info::exact(r),
        r => {
            filters.extend(r.map(|r| Info::exact(r).into_filter(ci)));
            Info {
                exact: None,
                filter: Filter::and(filters),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Filter, WordTest, filter};

    /// The filter as SQL with its patterns written in.
    fn check(query: &str, regex: bool, ci: bool, expected: &str) {
        let sql = filter(query, regex, ci).sql_literal(WordTest::Like {
            case_insensitive: ci,
        });
        assert_eq!(sql, expected, "{query:?} regex={regex} ci={ci}");
    }

    #[test]
    fn regexes_become_the_like_patterns_every_match_must_hold() {
        check(
            "parse_config",
            false,
            false,
            "(words LIKE E'% config%' AND words LIKE E'%parse %')",
        );
        check(r"fn\s+new_[a-z]+\(", true, false, "words LIKE E'%new %'");
        check(
            r"static\s+int\s+[a-z_]+_probe\(",
            true,
            false,
            "(words LIKE E'% probe %' AND words LIKE E'%static%' AND words LIKE E'%int%')",
        );
        check(
            r"(kvm|xen)_[a-z]+_msr_(read|write)",
            true,
            false,
            "(((words LIKE E'% msr %' AND words LIKE E'% read%') \
             OR (words LIKE E'% write%' AND words LIKE E'% msr %')) \
             AND (words LIKE E'%kvm %' OR words LIKE E'%xen %'))",
        );
        check(
            "colou?r",
            true,
            false,
            "(words LIKE E'%color%' OR words LIKE E'%colour%')",
        );
        check(
            "ab[cd]",
            true,
            false,
            "(words LIKE E'%abc%' OR words LIKE E'%abd%')",
        );
    }

    #[test]
    fn a_regex_without_a_sure_trigram_is_no_condition() {
        check("a.c", true, false, "true");
        check("(foo|x)", true, false, "true");
        check("(foo)*bar?", true, false, "true");
        check(r"\w+", true, false, "true");
        check("(?-u:\\xff)abc", true, false, "true");
        check("fo(", true, false, "true");
        check("ab\\x00cd", true, false, "true");
    }

    #[test]
    fn case_insensitive_regexes_keep_only_letters_ilike_surely_folds() {
        check(
            "Kvm_setup",
            true,
            true,
            "(words ILIKE E'%etup%' AND words ILIKE E'%vm %')",
        );
        check("Kvm_set", true, true, "words ILIKE E'%vm %'");
        check("VMX", true, true, "words ILIKE E'%vmx%'");
    }

    #[test]
    fn rows_read_without_the_index_test_their_words_by_position() {
        let check = |query: &str, ci: bool, expected: &str| {
            let test = WordTest::Position {
                case_insensitive: ci,
            };
            let sql = filter(query, false, ci).sql_literal(test);
            assert_eq!(sql, expected, "{query:?} ci={ci}");
        };
        check(
            "return -EINVAL;",
            false,
            "(strpos(words, E' EINVAL ') > 0 AND strpos(words, E'return ') > 0)",
        );
        check(
            "Return -EINVAL;",
            true,
            "(strpos(lower(words COLLATE \"C\"), E' einval ') > 0 \
             AND strpos(lower(words COLLATE \"C\"), E'return ') > 0)",
        );
        assert_eq!(filter("->", false, false), Filter::All);
    }
}
