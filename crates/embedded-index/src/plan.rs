//! Planning a query into a trigram query: an AND/OR tree of trigrams that every file holding a
//! match must satisfy, after Russ Cox, "Regular Expression Matching with a Trigram Index".
//!
//! The regex is parsed as ripgrep's matcher parses it (`search_profile::query_hir`, the matcher's
//! own configuration, so case-insensitive classes already hold every simple case folding, U+212A
//! KELVIN SIGN included) and each node is summarized by what its matches look like: the exact set
//! of strings it matches when that set is small, else the sets of their prefixes and suffixes,
//! plus a trigram query that is a necessary condition. Whenever a summary is coarsened, the
//! trigrams of what it forgets are first added to its query, so the query only ever weakens
//! soundly. A fixed string is planned as its escaped regex. Strings are kept with ASCII letters
//! folded, as the index stores trigrams.

use std::collections::BTreeSet;
use std::fmt;

#[cfg(test)]
use index_contract::SearchMode;
use index_contract::SearchRequest;
use regex_syntax::hir::{Class, Hir, HirKind};

use crate::trigram;

/// The largest set of strings a summary keeps; a bigger set is coarsened.
const MAX_SET: usize = 32;
/// The most alternatives an OR keeps; a bigger one is no condition at all.
const MAX_OR: usize = 256;
/// The most parts an AND keeps: dropping parts only widens it, and a long query's first parts
/// already select about as well as all of them, while keeping every part would make planning
/// quadratic in the query's length.
const MAX_AND: usize = 128;

/// A trigram query: which files may hold a match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Plan {
    /// Every file: the query gives no usable trigram.
    All,
    /// Files holding this trigram (ASCII-folded, packed as the index packs it).
    Trigram(u32),
    /// Files satisfying every part (at least two, none `All`).
    And(Vec<Plan>),
    /// Files satisfying some part (at least two, none `All`).
    Or(Vec<Plan>),
}

impl Plan {
    /// The conjunction of `parts`, flattened, sorted and deduplicated.
    pub(crate) fn and(parts: impl IntoIterator<Item = Plan>) -> Plan {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Plan::All => {}
                Plan::And(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        out.sort();
        out.dedup();
        out.truncate(MAX_AND);
        match out.len() {
            0 => Plan::All,
            1 => out.pop().unwrap_or(Plan::All),
            _ => Plan::And(out),
        }
    }

    /// The disjunction of `parts`, flattened, with the conditions common to every part factored
    /// out: `(a b) | (a c)` is `a (b | c)`.
    pub(crate) fn or(parts: impl IntoIterator<Item = Plan>) -> Plan {
        let mut alts: Vec<Plan> = Vec::new();
        for p in parts {
            match p {
                Plan::All => return Plan::All,
                Plan::Or(inner) => alts.extend(inner),
                other => alts.push(other),
            }
        }
        alts.sort();
        alts.dedup();
        if alts.len() > MAX_OR {
            return Plan::All;
        }
        if alts.len() <= 1 {
            return alts.pop().unwrap_or(Plan::All);
        }
        let conjuncts = |p: &Plan| match p {
            Plan::And(cs) => cs.clone(),
            other => vec![other.clone()],
        };
        let mut common: Vec<Plan> = conjuncts(&alts[0]);
        for a in &alts[1..] {
            let cs = conjuncts(a);
            common.retain(|c| cs.contains(c));
        }
        if common.is_empty() {
            return Plan::Or(alts);
        }
        // One alternative was exactly the common part: the rest only narrow it, and an OR with
        // it is the common part itself.
        let rests: Vec<Plan> = alts
            .iter()
            .map(|a| Plan::and(conjuncts(a).into_iter().filter(|c| !common.contains(c))))
            .collect();
        Plan::and(common.into_iter().chain([Plan::or(rests)]))
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Plan::All => f.write_str("*"),
            Plan::Trigram(t) => {
                for b in [(t >> 16) as u8, (t >> 8) as u8, *t as u8] {
                    if b.is_ascii_graphic() {
                        write!(f, "{}", b as char)?;
                    } else {
                        write!(f, "\\x{b:02x}")?;
                    }
                }
                Ok(())
            }
            Plan::And(parts) => {
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{p}")?;
                }
                Ok(())
            }
            Plan::Or(parts) => {
                f.write_str("(")?;
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" | ")?;
                    }
                    write!(f, "{p}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// The trigram query for `query`, a regex when `regex` is set and a fixed string otherwise,
/// matched case-insensitively when `case_insensitive` is set. A pattern the parser refuses (the
/// matcher refuses it too) plans as [`Plan::All`].
#[cfg(test)]
pub(crate) fn plan(query: &str, regex: bool, case_insensitive: bool) -> Plan {
    let mut request = SearchRequest::new(query, SearchMode::IndexedLiteral);
    request.regex = regex;
    request.case_insensitive = case_insensitive;
    request_plan(&request)
}

/// The trigram query for a request's query, as its `regex`, `case_insensitive` and `multiline`
/// shape it. A multi-line query plans as its parts between line breaks, since the index holds no
/// trigram spanning one: a line break in a literal splits it, and a class that can match one
/// (`\s`, `[^a]`) is no condition at all.
pub(crate) fn request_plan(request: &SearchRequest) -> Plan {
    let hir = search_profile::query_hir(&request.query, request.regex, request.case_insensitive);
    match hir {
        Some(hir) => summarize(&hir, request.multiline).into_plan(),
        None => Plan::All,
    }
}

/// A set of ASCII-folded strings.
type Set = BTreeSet<Vec<u8>>;

/// What the matches of one regex node look like.
#[derive(Debug, Clone)]
struct Info {
    /// Every string the node matches, when known and small.
    exact: Option<Set>,
    /// Without `exact`: every match starts with one of these ("" when nothing is known).
    prefix: Set,
    /// Without `exact`: every match ends with one of these.
    suffix: Set,
    /// A necessary condition on a file holding a match.
    query: Plan,
}

fn set_of(s: &[u8]) -> Set {
    BTreeSet::from([s.iter().map(|&b| trigram::fold(b)).collect()])
}

impl Info {
    fn exact(set: Set) -> Info {
        Info {
            exact: Some(set),
            prefix: Set::new(),
            suffix: Set::new(),
            query: Plan::All,
        }
    }

    /// Matches anything: nothing known.
    fn any() -> Info {
        Info {
            exact: None,
            prefix: set_of(b""),
            suffix: set_of(b""),
            query: Plan::All,
        }
    }

    /// Forgets the exact set, keeping its trigrams in the query and the set as prefixes and
    /// suffixes.
    fn inexact(mut self) -> Info {
        if let Some(set) = self.exact.take() {
            self.query = Plan::and([self.query, any_of(&set)]);
            self.prefix = set.clone();
            self.suffix = set;
        }
        self
    }

    /// Keeps the sets small: an exact set over [`MAX_SET`] is forgotten, and prefixes and
    /// suffixes are cut to two bytes (all a trigram across a later boundary needs) once their
    /// trigrams are in the query, then shorter while there are too many of them.
    fn simplify(mut self) -> Info {
        if self.exact.as_ref().is_some_and(|s| s.len() > MAX_SET) {
            self = self.inexact();
        }
        if self.exact.is_none() {
            self.query = Plan::and([self.query, any_of(&self.prefix), any_of(&self.suffix)]);
            self.prefix = trim(&self.prefix, |s, n| &s[..n]);
            self.suffix = trim(&self.suffix, |s, n| &s[s.len() - n..]);
        }
        self
    }

    /// The final query: the summary's own, with the trigrams of what it knows.
    fn into_plan(self) -> Plan {
        let done = self.inexact().simplify();
        done.query
    }
}

/// Cuts every string to at most two bytes with `cut(s, n)`, then to fewer while the set is over
/// [`MAX_SET`].
fn trim(set: &Set, cut: impl Fn(&[u8], usize) -> &[u8]) -> Set {
    for n in (0..=2).rev() {
        let out: Set = set
            .iter()
            .map(|s| cut(s, n.min(s.len())).to_vec())
            .collect();
        if out.len() <= MAX_SET {
            return out;
        }
    }
    set_of(b"")
}

/// Every concatenation of a string of `a` with one of `b`, when there are at most [`MAX_SET`].
fn cross(a: &Set, b: &Set) -> Option<Set> {
    if a.len().saturating_mul(b.len()) > MAX_SET {
        return None;
    }
    Some(
        a.iter()
            .flat_map(|x| b.iter().map(move |y| [x.as_slice(), y].concat()))
            .collect(),
    )
}

/// Files holding every trigram of some string of `set`; [`Plan::All`] when a string is shorter
/// than a trigram.
fn any_of(set: &Set) -> Plan {
    if set.iter().any(|s| s.len() < 3) {
        return Plan::All;
    }
    Plan::or(set.iter().map(|s| {
        Plan::and(
            s.windows(3)
                .map(|w| Plan::Trigram(trigram::pack(w[0], w[1], w[2]))),
        )
    }))
}

/// What the matches of `hir` look like; `multiline` when they may hold a line break.
fn summarize(hir: &Hir, multiline: bool) -> Info {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::exact(set_of(b"")),
        // The index holds no trigram spanning a line break: the parts between line breaks are
        // planned on their own, and the break matches as anything would (outside multi-line
        // mode the matcher refuses such a literal anyway).
        HirKind::Literal(lit) if lit.0.contains(&b'\n') => lit
            .0
            .split(|&b| b == b'\n')
            .map(|part| Info::exact(set_of(part)))
            .reduce(|a, b| concat(concat(a, Info::any()), b))
            .unwrap_or_else(Info::any),
        HirKind::Literal(lit) => Info::exact(set_of(&lit.0)),
        // Outside multi-line mode ripgrep strips the line break from a class; within it, a
        // class that can match one can end a line, so it gives no condition.
        HirKind::Class(class) if multiline && class_has_line_break(class) => Info::any(),
        HirKind::Class(class) => class_info(class),
        HirKind::Capture(c) => summarize(&c.sub, multiline),
        HirKind::Repetition(rep) => {
            if rep.max == Some(0) {
                return Info::exact(set_of(b""));
            }
            let sub = summarize(&rep.sub, multiline);
            if rep.min == 0 {
                // `x?` matches x or nothing; `x*` anything in general.
                return match (rep.max, sub.exact) {
                    (Some(1), Some(mut set)) => {
                        set.insert(Vec::new());
                        Info::exact(set).simplify()
                    }
                    _ => Info::any(),
                };
            }
            if rep.max == Some(rep.min) && rep.min <= 4 && sub.exact.is_some() {
                return (1..rep.min).fold(sub.clone(), |acc, _| concat(acc, sub.clone()));
            }
            // `x{n,}`: starts with an x and ends with one.
            sub.inexact().simplify()
        }
        HirKind::Concat(parts) => parts
            .iter()
            .map(|p| summarize(p, multiline))
            .reduce(concat)
            .unwrap_or_else(|| Info::exact(set_of(b""))),
        HirKind::Alternation(parts) => parts
            .iter()
            .map(|p| summarize(p, multiline))
            .reduce(alternate)
            .unwrap_or_else(Info::any),
    }
}

/// Whether `class` matches `\n`.
fn class_has_line_break(class: &Class) -> bool {
    match class {
        Class::Unicode(u) => u
            .ranges()
            .iter()
            .any(|r| r.start() <= '\n' && '\n' <= r.end()),
        Class::Bytes(b) => b
            .ranges()
            .iter()
            .any(|r| r.start() <= b'\n' && b'\n' <= r.end()),
    }
}

/// A class: the exact set of its (folded) characters when small. Line breaks and NUL bytes are
/// left out: ripgrep never matches either.
fn class_info(class: &Class) -> Info {
    let mut set = Set::new();
    let mut add = |bytes: &[u8]| {
        if bytes != b"\n" && bytes != b"\0" {
            set.insert(bytes.iter().map(|&b| trigram::fold(b)).collect());
        }
        set.len() <= MAX_SET
    };
    let small = match class {
        Class::Unicode(u) => u.ranges().iter().all(|r| {
            (u32::from(r.start())..=u32::from(r.end()))
                .filter_map(char::from_u32)
                .all(|c| add(c.encode_utf8(&mut [0; 4]).as_bytes()))
        }),
        Class::Bytes(b) => b
            .ranges()
            .iter()
            .all(|r| (r.start()..=r.end()).all(|x| add(&[x]))),
    };
    if small && !set.is_empty() {
        Info::exact(set)
    } else {
        // Too many to list, or empty (matches nothing, so any condition is sound).
        Info::any()
    }
}

fn concat(a: Info, b: Info) -> Info {
    if let (Some(x), Some(y)) = (&a.exact, &b.exact)
        && let Some(both) = cross(x, y)
    {
        let mut out = Info::exact(both);
        out.query = Plan::and([a.query, b.query]);
        return out.simplify();
    }
    let (a_exact, b_exact) = (a.exact.clone(), b.exact.clone());
    let (a, b) = (a.inexact().simplify(), b.inexact().simplify());
    let prefix = a_exact.and_then(|x| cross(&x, &b.prefix));
    let suffix = b_exact.and_then(|y| cross(&a.suffix, &y));
    // Every match holds some suffix of `a` followed by some prefix of `b`.
    let across = cross(&a.suffix, &b.prefix).map_or(Plan::All, |s| any_of(&s));
    Info {
        exact: None,
        prefix: prefix.unwrap_or(a.prefix),
        suffix: suffix.unwrap_or(b.suffix),
        query: Plan::and([a.query, b.query, across]),
    }
    .simplify()
}

fn alternate(a: Info, b: Info) -> Info {
    if let (Some(x), Some(y)) = (&a.exact, &b.exact) {
        let mut out = Info::exact(x.union(y).cloned().collect());
        out.query = Plan::or([a.query, b.query]);
        return out.simplify();
    }
    let (a, b) = (a.inexact().simplify(), b.inexact().simplify());
    Info {
        exact: None,
        prefix: a.prefix.union(&b.prefix).cloned().collect(),
        suffix: a.suffix.union(&b.suffix).cloned().collect(),
        query: Plan::or([a.query, b.query]),
    }
    .simplify()
}

#[cfg(test)]
mod tests {
    use index_contract::{SearchMode, SearchRequest};

    use super::{plan, request_plan};

    fn check(pattern: &str, case_insensitive: bool, expected: &str) {
        let got = plan(pattern, true, case_insensitive).to_string();
        assert_eq!(got, expected, "{pattern:?} ci={case_insensitive}");
    }

    #[test]
    fn regexes_plan_into_trigram_queries() {
        check("abc", false, "abc");
        check("abcd", false, "abc bcd");
        check("ab", false, "*");
        check("ABC", false, "abc");
        check(".*", false, "*");
        check(r"\w+", false, "*");
        check("abc|xyz", false, "(abc | xyz)");
        check("abc|xy", false, "*");
        check("(abc|abd)e", false, "(abc bce | abd bde)");
        check("foo(bar|baz)", false, "foo oba oob (bar | baz)");
        check("a[bc]d", false, "(abd | acd)");
        check("abc?d", false, "(abd | abc bcd)");
        check("abc+", false, "abc");
        check("(abc)+xyz", false, "abc bcx cxy xyz");
        check("x{3}", false, "xxx");
        check(
            "[a-b]xyz[0-1]",
            false,
            "xyz (axy yz0 | axy yz1 | bxy yz0 | bxy yz1)",
        );
        check(r"\w+Config", false, "con fig nfi onf");
        // An unmatchable line break, and a class that would need one, narrow nothing.
        check("a\nb", false, "*");
        check("[\n]ab", false, "*");
    }

    #[test]
    fn multi_line_queries_plan_their_parts_between_line_breaks() {
        let check = |query: &str, regex: bool, expected: &str| {
            let mut request = SearchRequest::new(query, SearchMode::IndexedLiteral);
            request.regex = regex;
            request.multiline = true;
            assert_eq!(request_plan(&request).to_string(), expected, "{query:?}");
        };
        check("abc\ndef", false, "abc def");
        check("abcd\nxyz", false, "abc bcd xyz");
        check(
            r"fn main\(\)\n\}",
            true,
            "\\x20ma ain fn\\x20 in( mai n\\x20m n()",
        );
        // A class that can match a line break gives no condition; one that cannot still does.
        check(r"abc\s+def", true, "abc def");
        check(r"abc[^x]def", true, "abc def");
        check(r"ab[cd]\nxyz", true, "xyz (abc | abd)");
        check("a\nb", false, "*");
    }

    #[test]
    fn a_large_class_is_listed_not_dropped() {
        // `\s` is about twenty characters, some of them multi-byte: each is an alternative.
        let got = plan(r"fn\s+new_[a-z]+\(", true, false).to_string();
        assert!(got.starts_with("ew_ new ("), "{got}");
        assert!(
            got.contains("(fn\\x09 | fn\\x0b | fn\\x0c | fn\\x0d | fn\\x20 |"),
            "{got}"
        );
        assert!(got.ends_with("(w_a | w_b | w_c | w_d | w_e | w_f | w_g | w_h | w_i | w_j | w_k | w_l | w_m | w_n | w_o | w_p | w_q | w_r | w_s | w_t | w_u | w_v | w_w | w_x | w_y | w_z)"), "{got}");
    }

    #[test]
    fn case_insensitive_plans_keep_every_folding() {
        check("abc", true, "abc");
        check("(?i)hello", false, "ell hel llo");
        // K also matches U+212A KELVIN SIGN, whose bytes are trigrams of their own.
        check("kab", true, "(kab | \\x84\\xaaa \\xaaab \\xe2\\x84\\xaa)");
        // s also matches U+017F LONG S.
        check(
            "parse_config",
            true,
            "_co con e_c fig nfi onf par (ars rse se_ | ar\\xc5 r\\xc5\\xbf \\xbfe_ \\xc5\\xbfe)",
        );
    }

    #[test]
    fn a_long_case_insensitive_query_plans_into_a_bounded_and() {
        // Speed is measured in benchmarks, not here; the bound on the AND is what keeps it fast.
        let query = "struct kernel_sched_class ".repeat(160);
        match plan(&query, false, true) {
            super::Plan::And(parts) => assert!((20..=super::MAX_AND).contains(&parts.len())),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn fixed_strings_plan_as_their_escaped_regex() {
        assert_eq!(plan("a.c", false, false).to_string(), "a.c");
        assert_eq!(plan("a+b(", false, false).to_string(), "+b( a+b");
        assert_eq!(plan("ab", false, false).to_string(), "*");
    }
}
