//! The SQL pre-filter of a query: an AND/OR tree of `LIKE` (or `ILIKE`) patterns that every file
//! holding a match satisfies, so that the `pg_trgm` index narrows the candidates.
//!
//! A fixed string is one pattern. A regex is parsed as ripgrep's matcher parses it and each node
//! is summarized, after Russ Cox's trigram plan, by the exact set of strings it matches when that
//! set is small, else by a condition its matches imply: a concatenation needs each part's
//! condition, an alternation one of its branches', a repetition of at least one its operand's.
//! PostgreSQL's own `~` is not used: its regex dialect differs from ripgrep's, and a pre-filter
//! must never drop a real match. Verification with the shared profile decides every hit.

use std::collections::BTreeSet;

use regex_syntax::hir::{Class, Hir, HirKind};

use crate::content::like_pattern;

/// The largest exact set a summary keeps; a bigger one becomes a condition.
const MAX_SET: usize = 16;
/// The most patterns a filter keeps: dropping parts of an AND only widens it, and an OR that
/// would grow past this is no condition at all.
const MAX_PATTERNS: usize = 24;
/// The most characters a class may hold to be expanded into exact strings.
const MAX_CLASS: u32 = 4;

/// Which files may hold a match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Filter {
    /// Every file: the query gives no usable trigram.
    All,
    /// Files whose content is `LIKE` (or `ILIKE`) this pattern, which holds a trigram.
    Like(String),
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
            Filter::Like(_) => 1,
            Filter::And(v) | Filter::Or(v) => v.iter().map(Filter::patterns).sum(),
        }
    }

    /// A rough selectivity: the length of the shortest pattern a file must hold.
    fn weight(&self) -> usize {
        match self {
            Filter::All => 0,
            Filter::Like(p) => p.len(),
            Filter::And(v) => v.iter().map(Filter::weight).max().unwrap_or(0),
            Filter::Or(v) => v.iter().map(Filter::weight).min().unwrap_or(0),
        }
    }

    /// The filter as an SQL condition on `content`, its patterns bound from `$first` on.
    pub(crate) fn sql(&self, op: &str, first: usize, params: &mut Vec<String>) -> String {
        match self {
            Filter::All => "true".to_owned(),
            Filter::Like(p) => {
                params.push(p.clone());
                format!("content {op} ${}", first + params.len() - 1)
            }
            Filter::And(v) | Filter::Or(v) => {
                let join = if matches!(self, Filter::And(_)) {
                    " AND "
                } else {
                    " OR "
                };
                let parts: Vec<String> = v.iter().map(|f| f.sql(op, first, params)).collect();
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
    // ripgrep's parser configuration (grep-regex), as `search_profile` uses it.
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .unicode(true)
        .octal(false)
        .multi_line(true)
        .dot_matches_new_line(false)
        .case_insensitive(case_insensitive)
        .build()
        .parse(&format!("(?:{query})"));
    match hir {
        Ok(hir) => summarize(&hir, case_insensitive).into_filter(case_insensitive),
        Err(_) => Filter::All,
    }
}

/// One string as a pattern, or no condition when it holds no trigram.
fn like(s: &str, case_insensitive: bool) -> Filter {
    match like_pattern(s, case_insensitive) {
        (p, true) => Filter::Like(p),
        (_, false) => Filter::All,
    }
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
    // Under `ILIKE` only ASCII case is surely folded (`like_pattern` turns other cased letters
    // into `_`), so only ASCII is lowercased, which keeps one character for one.
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
    use super::filter;

    /// The filter as SQL on its patterns, inlined for reading.
    fn check(query: &str, regex: bool, ci: bool, expected: &str) {
        let mut params = Vec::new();
        let mut sql = filter(query, regex, ci).sql("LIKE", 1, &mut params);
        for (i, p) in params.iter().enumerate().rev() {
            sql = sql.replace(&format!("${}", i + 1), &format!("'{p}'"));
        }
        assert_eq!(sql, expected, "{query:?} regex={regex} ci={ci}");
    }

    #[test]
    fn regexes_become_the_like_patterns_every_match_must_hold() {
        check(
            "parse_config",
            false,
            false,
            "content LIKE '%parse\\_config%'",
        );
        check(r"fn\s+new_[a-z]+\(", true, false, "content LIKE '%new\\_%'");
        check(
            r"static\s+int\s+[a-z_]+_probe\(",
            true,
            false,
            "(content LIKE '%\\_probe(%' AND content LIKE '%static%' AND content LIKE '%int%')",
        );
        check(
            r"(kvm|xen)_[a-z]+_msr_(read|write)",
            true,
            false,
            "((content LIKE '%\\_msr\\_read%' OR content LIKE '%\\_msr\\_write%') \
             AND (content LIKE '%kvm\\_%' OR content LIKE '%xen\\_%'))",
        );
        check(
            "colou?r",
            true,
            false,
            "(content LIKE '%color%' OR content LIKE '%colour%')",
        );
        check(
            "ab[cd]",
            true,
            false,
            "(content LIKE '%abc%' OR content LIKE '%abd%')",
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
        check("Kvm_setup", true, true, "content LIKE '%_vm\\__etup%'");
        check("Kvm_set", true, true, "true");
        check("VMX", true, true, "content LIKE '%vmx%'");
    }
}
