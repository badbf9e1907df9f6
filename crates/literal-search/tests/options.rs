//! Every grep option of the literal search, alone and in every pair, agrees with the real `rg` on
//! generated trees: lines, columns and context lines (`rg --json`), the files of `rg -l` and the
//! counts of `rg -c`.

mod support;

use std::collections::BTreeMap;

use index_contract::{OutputMode, SearchMode, SearchRequest, limits::SearchLimits};
use literal_search::{LiteralSearch, LiteralSearchConfig};
use support::{RgLine, generated_tree, rg_lines, rg_per_file};

/// The snippet cap of these searches, so that context lines are compared as both cut them.
const CAP: usize = 4096;

/// One option, as it edits a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    Regex,
    /// Include globs, one of which (`*.log`) matches files `.gitignore` excludes: ripgrep searches
    /// them, since a glob overrides the ignore rules.
    GlobInclude,
    GlobExclude,
    Type,
    Files,
    Count,
    After,
    Before,
    Around,
    Hidden,
    NoIgnore,
    CaseInsensitive,
    /// `rg -U`: with the multi-line queries below, matches that span lines.
    Multiline,
}

const ALL: [Opt; 13] = [
    Opt::Regex,
    Opt::GlobInclude,
    Opt::GlobExclude,
    Opt::Type,
    Opt::Files,
    Opt::Count,
    Opt::After,
    Opt::Before,
    Opt::Around,
    Opt::Hidden,
    Opt::NoIgnore,
    Opt::CaseInsensitive,
    Opt::Multiline,
];

impl Opt {
    fn apply(self, r: &mut SearchRequest) {
        match self {
            Opt::Regex => r.regex = true,
            Opt::GlobInclude => r.files.globs = vec!["*.log".into(), "src/**".into()],
            Opt::GlobExclude => r.files.globs = vec!["!*.md".into(), "!sub/**".into()],
            Opt::Type => r.files.types = vec!["rust".into(), "txt".into()],
            Opt::Files => r.output = OutputMode::Files,
            Opt::Count => r.output = OutputMode::Count,
            Opt::After => r.context.after = 2,
            Opt::Before => r.context.before = 3,
            Opt::Around => {
                r.context.before = 1;
                r.context.after = 1;
            }
            Opt::Hidden => r.files.include_hidden = true,
            Opt::NoIgnore => r.files.include_ignored = true,
            Opt::CaseInsensitive => r.case_insensitive = true,
            Opt::Multiline => r.multiline = true,
        }
    }

    fn is_context(self) -> bool {
        matches!(self, Opt::After | Opt::Before | Opt::Around)
    }

    fn is_output(self) -> bool {
        matches!(self, Opt::Files | Opt::Count)
    }
}

/// Whether the pair is a request at all: one output mode, one context, and context only with
/// content output (the guard refuses the rest, which `context_with_files_or_count_is_refused`
/// pins).
fn valid(a: Opt, b: Opt) -> bool {
    let context_and_output = (a.is_context() && b.is_output()) || (b.is_context() && a.is_output());
    !(a.is_context() && b.is_context() || a.is_output() && b.is_output() || context_and_output)
}

fn search(root: &std::path::Path) -> LiteralSearch {
    LiteralSearch::with_config(
        root,
        LiteralSearchConfig {
            limits: SearchLimits::new(10_000, CAP, std::time::Duration::from_secs(60)).unwrap(),
            ..Default::default()
        },
    )
    .unwrap()
}

fn sorted_by_path_then_line(mut v: Vec<RgLine>) -> Vec<RgLine> {
    v.sort();
    v
}

/// Runs `request` on both and compares; returns how many hits agreed.
fn check(search: &LiteralSearch, root: &std::path::Path, request: &SearchRequest) -> usize {
    let result = search.search_blocking(request).expect("search");
    assert!(result.complete, "{request:?}: {:?}", result.stopped);
    let what = || format!("query {:?} {:?}", request.query, describe(request));
    // ripgrep enters `.git` with `--hidden` or `--no-ignore`; the literal search never does (it
    // holds git's internals, credentials included), whatever the flags.
    let lines: Vec<RgLine> = rg_lines(root, request, CAP)
        .into_iter()
        .filter(|l| !in_git(&l.path))
        .collect();
    match request.output {
        OutputMode::Content => {
            let context = request.context.any();
            let ours: Vec<RgLine> = result
                .hits
                .iter()
                .map(|h| {
                    assert_eq!(h.before.is_some(), context, "{}", what());
                    RgLine {
                        path: h.path.clone(),
                        line: h.line,
                        column: h.column,
                        before: h.before.clone().unwrap_or_default(),
                        after: h.after.clone().unwrap_or_default(),
                    }
                })
                .collect();
            let ours = sorted_by_path_then_line(ours);
            if ours != lines {
                let first = (0..ours.len().max(lines.len()))
                    .find(|&i| ours.get(i) != lines.get(i))
                    .unwrap_or(0);
                panic!(
                    "{}: {} hits against rg's {}; first difference at {first}: ours {:?}, rg {:?}",
                    what(),
                    ours.len(),
                    lines.len(),
                    ours.get(first),
                    lines.get(first)
                );
            }
            lines.len()
        }
        OutputMode::Files | OutputMode::Count => {
            let count = request.output == OutputMode::Count;
            let mut per_file = rg_per_file(root, request, count);
            per_file.retain(|path, _| !in_git(path));
            // The hit of a file is its first match, which `rg --json` gives.
            let mut first: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
            for l in &lines {
                first.entry(&l.path).or_insert((l.line, l.column));
            }
            let expected: BTreeMap<String, (u64, u64, Option<u64>)> = per_file
                .iter()
                .map(|(path, &n)| {
                    let (line, column) = first[path.as_str()];
                    (path.clone(), (line, column, count.then_some(n)))
                })
                .collect();
            let ours: BTreeMap<String, (u64, u64, Option<u64>)> = result
                .hits
                .iter()
                .map(|h| (h.path.clone(), (h.line, h.column, h.count)))
                .collect();
            assert_eq!(ours.len(), result.hits.len(), "{}: a file twice", what());
            assert_eq!(ours, expected, "{}", what());
            expected.len()
        }
    }
}

fn in_git(path: &str) -> bool {
    path.split('/').any(index_guard::is_git_internal_segment)
}

fn describe(r: &SearchRequest) -> String {
    format!(
        "regex={} ci={} multiline={} files={:?} output={:?} context={:?} scope={:?}",
        r.regex, r.case_insensitive, r.multiline, r.files, r.output, r.context, r.path
    )
}

fn request(query: &str, opts: &[Opt]) -> SearchRequest {
    let mut r = SearchRequest::new(query, SearchMode::Literal);
    r.max_results = Some(10_000);
    for o in opts {
        o.apply(&mut r);
    }
    r
}

/// Fixed strings, and regexes for requests with `regex`; each finds hits in several kinds of file.
/// Multi-line requests get queries that span lines (and one that cannot, searched line by line).
fn queries(regex: bool, multiline: bool) -> &'static [&'static str] {
    if multiline {
        return if regex {
            &[
                r"\}\r?\n\{",
                r"(?i)todo\s+[a-z]+",
                r";$\n^[^\n]*x",
                r"\w+\n\w+",
                r"fn\s+main",
            ]
        } else {
            &["}\n{", "x\ny", "index"]
        };
    }
    if regex {
        &[
            r"fn\s+main",
            r"\b(INDEX|TODO)\b",
            r"caf[eé]|Stra(ß|ss)e",
            r"^\}|;$",
            r"\x{212A}elvin",
        ]
    } else {
        &["fn main", "index", "café", "secret"]
    }
}

#[test]
fn every_option_and_every_pair_agrees_with_ripgrep() {
    let (tree, _outside) = generated_tree(11);
    let root = tree.path();
    // Files the default walk skips but the options reach: hidden ones, ignored ones, and a
    // hidden file an include glob names.
    support::write(root, ".env.log", b"fn main hidden log\nINDEX\n");
    support::write(root, ".hidden/dir/deep.rs", b"fn  main() { index }\n");
    support::write(root, "build/out.rs", b"fn main() {}\nCAFE\n");
    let search = search(root);
    let mut combos = vec![vec![]];
    combos.extend(ALL.iter().map(|&o| vec![o]));
    for (i, &a) in ALL.iter().enumerate() {
        for &b in &ALL[i + 1..] {
            if valid(a, b) {
                combos.push(vec![a, b]);
            }
        }
    }
    let mut compared = 0;
    for opts in &combos {
        let regex = opts.contains(&Opt::Regex);
        let multiline = opts.contains(&Opt::Multiline);
        let mut found = 0;
        for q in queries(regex, multiline) {
            found += check(&search, root, &request(q, opts));
        }
        assert!(
            found > 0,
            "{opts:?} found nothing: the comparison is vacuous"
        );
        compared += found;
    }
    assert_eq!(combos.len(), 1 + 13 + 78 - 3 - 1 - 6);
    assert!(compared > 5_000, "only {compared} hits compared");
    // Each option on its own and with the scope.
    for &o in &ALL {
        for q in queries(o == Opt::Regex, o == Opt::Multiline) {
            let mut r = request(q, &[o]);
            r.path = Some("src".into());
            check(&search, root, &r);
        }
    }
}

#[test]
fn context_with_files_or_count_is_refused() {
    let (tree, _outside) = generated_tree(12);
    let search = search(tree.path());
    for output in [Opt::Files, Opt::Count] {
        for context in [Opt::After, Opt::Before, Opt::Around] {
            let err = search
                .search_blocking(&request("main", &[output, context]))
                .unwrap_err();
            assert_eq!(err.code(), index_contract::ErrorCode::Unsupported);
        }
    }
}

#[test]
fn a_line_over_the_heap_limit_is_searched_exactly_or_skipped_as_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut long = vec![b'a'; 3 << 20];
    long.extend_from_slice(b" fn main42 \n");
    support::write(root, "long.txt", &long);
    support::write(root, "short.txt", b"x\nfn main7\n");
    let search = LiteralSearch::with_config(
        root,
        LiteralSearchConfig {
            heap_limit_bytes: 1 << 20,
            ..Default::default()
        },
    )
    .unwrap();
    let run = |query: &str, regex: bool, before: u32| {
        let mut r = request(query, &[]);
        r.regex = regex;
        r.context.before = before;
        let result = search.search_blocking(&r).unwrap();
        let hits: Vec<(String, u64, u64)> = result
            .hits
            .into_iter()
            .map(|h| (h.path, h.line, h.column))
            .collect();
        (hits, result.stats.files_skipped.unwrap().unreadable)
    };
    let both = vec![
        ("long.txt".to_owned(), 1, (3 << 20) + 2),
        ("short.txt".to_owned(), 2, 1),
    ];
    // A fixed string and a bounded regex take the bounded stream.
    assert_eq!(run("fn main", false, 0), (both.clone(), 0));
    assert_eq!(run(r"fn main[0-9]{1,2}\b", true, 0), (both, 0));
    // An unbounded regex, or context lines, cannot: the file is skipped, never guessed at.
    let short_only = vec![("short.txt".to_owned(), 2, 1)];
    assert_eq!(run(r"fn\s+main[0-9]+", true, 0), (short_only.clone(), 1));
    assert_eq!(run("fn main", false, 1), (short_only, 1));
}
