//! The fuzz checks: each takes raw fuzzer bytes, builds a structured input with `arbitrary`, runs
//! one validator, and panics if any invariant is broken. The fuzz targets call these, and
//! `cargo test` replays the committed corpora and every regression input through the same code
//! (`crates/repo-search-tool/tests/fuzz_regressions.rs`).

use std::collections::HashSet;
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use index_contract::{
    BackendHit, Change, ErrorCode, Field, IndexError, IndexState, IndexStatus, PathRejection,
    SearchMode, UnixMillis, UpdateRequest,
    limits::{MAX_ID_BYTES, MAX_PATH_BYTES, UpdateLimits},
};
use index_guard::{
    Scope, TrustContext, check_path, stamp, update_bytes, validate_hits, validate_update,
};
use unicode_normalization::UnicodeNormalization;

/// Strings biased toward the characters that matter to paths.
#[derive(Debug)]
struct PathLike(String);

impl<'a> Arbitrary<'a> for PathLike {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        const PIECES: &[&str] = &[
            "/", "//", ".", "..", "...", "a", "src", "srcx", "\\", "\0", "C:", "c:", "\u{FF0F}",
            "\u{FF0E}", "\u{2025}", "\u{202E}", "\u{200B}", "é", "日本", " ", "%2e", "\n",
            "\u{85}", "\u{7f}", ".git", "GIT~1", "\u{200C}", "\u{2044}", "\u{FF1A}", ":", "…",
            "\u{FF23}",
        ];
        if u.ratio(1, 4)? {
            return Ok(PathLike(String::arbitrary(u)?));
        }
        let n = u.int_in_range(0..=8)?;
        let mut s = String::new();
        for _ in 0..n {
            s.push_str(u.choose(PIECES)?);
        }
        Ok(PathLike(s))
    }
}

#[derive(Debug, Arbitrary)]
struct ArbHit {
    path: PathLike,
    line: u8,
    column: u8,
    snippet: String,
    score: f64,
}

#[derive(Debug, Arbitrary)]
struct TrustInput {
    hits: Vec<ArbHit>,
    scope: Option<PathLike>,
    max_results: u8,
    snippet_bytes: u8,
    backend_complete: bool,
}

/// The trust validator never panics, every accepted output satisfies every invariant, and every
/// rejection carries the documented code.
pub fn trust_validator(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(input) = TrustInput::arbitrary(&mut u) else {
        return;
    };
    let Ok(scope) = Scope::parse(input.scope.as_ref().map(|p| p.0.as_str())) else {
        return;
    };
    let max_results = usize::from(input.max_results.max(1));
    let snippet_bytes = usize::from(input.snippet_bytes.max(1));
    let hits: Vec<BackendHit> = input
        .hits
        .into_iter()
        .map(|h| BackendHit {
            path: h.path.0,
            line: u64::from(h.line),
            column: u64::from(h.column),
            snippet: h.snippet,
            score: h.score,
            count: None,
            before: Vec::new(),
            after: Vec::new(),
        })
        .collect();
    let ctx = TrustContext {
        scope: &scope,
        max_results,
        snippet_bytes,
        output: Default::default(),
        context: Default::default(),
    };
    match validate_hits(hits.clone(), &ctx) {
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::Untrusted, "{e}");
            let any_bad = hits.iter().any(|h| {
                check_path(&h.path).is_err()
                    || !scope.contains(&h.path)
                    || !(h.score.is_finite() && (0.0..=1.0).contains(&h.score))
                    || h.line == 0
                    || h.column == 0
            });
            assert!(any_bad, "a clean answer was refused: {e}");
            // No backend text can reach the message: the gate only returns variants whose
            // fields are the seam's own enums. (A substring test cannot show this: a path such as
            // "d a " occurs inside the fixed text "returned a score"; that input is kept in
            // fuzz/regressions/trust_validator.)
            assert!(
                matches!(
                    e,
                    IndexError::UntrustedPath {
                        field: Field::HitPath,
                        ..
                    } | IndexError::UntrustedScore
                        | IndexError::UntrustedPosition
                ),
                "unexpected refusal {e:?}"
            );
        }
        Ok(trusted) => {
            assert!(trusted.hits.len() <= max_results);
            let mut seen = HashSet::new();
            for h in &trusted.hits {
                assert!(check_path(&h.path).is_ok());
                assert!(reference_contained(&h.path), "guard accepted {:?}", h.path);
                assert!(scope.contains(&h.path));
                let s = h.score.expect("index hits carry scores");
                assert!(s.is_finite() && (0.0..=1.0).contains(&s));
                assert!(seen.insert(h.path.clone()), "duplicate path");
                assert!(h.snippet.len() <= snippet_bytes);
                let first = hits
                    .iter()
                    .find(|b| b.path == h.path)
                    .expect("came from the input");
                assert!(
                    first.snippet.starts_with(&h.snippet),
                    "first wins, cut at a char boundary"
                );
                assert_eq!(h.snippet_truncated, first.snippet.len() > snippet_bytes);
            }
            let status = IndexStatus {
                state: IndexState::Ready,
                source_revision: Some("r".into()),
                updated_at: Some(UnixMillis(1)),
            };
            let result = stamp(
                SearchMode::IndexedLiteral,
                &status,
                trusted,
                input.backend_complete,
            );
            assert_eq!(result.untrusted_index, Some(true));
            let prov = result.indexed.expect("provenance is stamped");
            assert_eq!(prov.state, IndexState::Ready);
            assert_eq!(prov.mode, SearchMode::IndexedLiteral);
        }
    }
}

/// An independent model of containment, written from the rules rather than from the guard's code:
/// it walks the path as a sequence of components on a stack, the way a filesystem resolves it,
/// and accepts only paths that resolve strictly inside the root, written canonically, without a
/// character that could make the shown path differ from the real one, and without naming git's
/// own data.
///
/// Every way the path can be read (as written, after NFKC, and with the UTS #39 look-alikes of
/// `/`, `\` and `.` replaced) must resolve to the same number of plain components.
pub fn reference_contained(path: &str) -> bool {
    if path.is_empty() || path.len() > MAX_PATH_BYTES {
        return false;
    }
    let invisible = |c: char| {
        matches!(c as u32,
            0x061C | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060 | 0x2066..=0x2069 | 0xFEFF)
    };
    if path
        .chars()
        .any(|c| c == '\\' || c.is_control() || invisible(c))
    {
        return false;
    }
    let nfkc: String = path.nfkc().collect();
    let readings = [
        path.to_owned(),
        look_alike_skeleton(path),
        look_alike_skeleton(&nfkc),
        nfkc,
    ];
    let written = path.split('/').count();
    for reading in &readings {
        let mut chars = reading.chars();
        if let (Some(a), Some(':')) = (chars.next(), chars.next())
            && a.is_ascii_alphabetic()
        {
            return false;
        }
        let mut depth: i64 = 0;
        for component in reading.split(['/', '\\']) {
            match component {
                // An empty component is a leading `/` (absolute), `//`, or a trailing `/`; `.` is
                // a no-op a canonical path does not write; `..` climbs, which a canonical path
                // never does.
                "" | "." | ".." => return false,
                _ => depth += 1,
            }
        }
        if depth != written as i64 {
            return false;
        }
    }
    // A one-dot look-alike written just before a separator reads as a name ending in `.`.
    let chars: Vec<char> = path.chars().collect();
    if chars.windows(2).any(|w| {
        w[1] == '/' && w[0] != '.' && {
            let one = w[0].to_string();
            look_alike_skeleton(&one) == "." || one.nfkc().collect::<String>() == "."
        }
    }) {
        return false;
    }
    !path.split('/').any(names_dot_git)
}

/// The look-alikes of `/`, `\` and `.` in UTS #39 confusables.txt (14.0.0) that are not letters or
/// digits, replaced by what they look like.
fn look_alike_skeleton(text: &str) -> String {
    text.chars()
        .map(|c| match c as u32 {
            0x1735 | 0x2041 | 0x2044 | 0x2215 | 0x2571 | 0x27CB | 0x29F6 | 0x29F8 | 0x2F03
            | 0x31D3 | 0x1D23A => "/".to_owned(),
            0x2AFD => "//".to_owned(),
            0x2216 | 0x27CD | 0x29F5 | 0x29F9 | 0x2F02 | 0x31D4 | 0xFE68 | 0xFF3C | 0x1D20F
            | 0x1D23B => "\\".to_owned(),
            0x244A | 0x2CF9 => "\\\\".to_owned(),
            0x0701 | 0x0702 | 0x2024 | 0xA60E | 0x10A50 => ".".to_owned(),
            0x2025 => "..".to_owned(),
            0x2026 => "...".to_owned(),
            _ => c.to_string(),
        })
        .collect()
}

/// Whether a component is `.git` to some filesystem git protects: HFS+ (which ignores some
/// invisible code points and folds case) or NTFS (which trims trailing dots and spaces, knows the
/// short name `git~1`, and reads `name:stream` as `name`).
fn names_dot_git(component: &str) -> bool {
    let hfs: String = component
        .chars()
        .filter(
            |&c| !matches!(c as u32, 0x200C..=0x200F | 0x202A..=0x202E | 0x206A..=0x206F | 0xFEFF),
        )
        .collect::<String>()
        .to_ascii_lowercase();
    let ntfs = component
        .split(':')
        .next()
        .unwrap_or("")
        .trim_end_matches(['.', ' '])
        .to_ascii_lowercase();
    hfs == ".git" || ntfs == ".git" || ntfs == "git~1"
}

/// The guard's containment check agrees with the reference model on every input, and refuses
/// for a documented reason.
pub fn path_containment(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(p) = PathLike::arbitrary(&mut u) else {
        return;
    };
    let guard = check_path(&p.0);
    assert_eq!(
        guard.is_ok(),
        reference_contained(&p.0),
        "disagreement on {:?}: guard says {guard:?}",
        p.0
    );
    if let Err(reason) = guard {
        assert!(!reason.describe().is_empty());
        assert_ne!(
            reason,
            PathRejection::OutsideScope,
            "check_path knows no scope"
        );
    }
    // Scope containment is component-wise: whatever the scope, a contained path under it is
    // admitted and a sibling sharing its prefix is not.
    if guard.is_ok()
        && let Ok(scope) = Scope::parse(Some(&p.0))
    {
        assert!(scope.contains(&p.0));
        assert!(scope.contains(&format!("{}/x", p.0)));
        assert!(!scope.contains(&format!("{}x/y", p.0)));
    }
}

#[derive(Debug, Arbitrary)]
enum ArbChange {
    Add(PathLike),
    Edit(PathLike),
    Rename(PathLike, PathLike),
    Delete(PathLike),
}

#[derive(Debug, Arbitrary)]
struct UpdateInput {
    repository_id: String,
    worktree_id: String,
    source_revision: String,
    changes: Vec<ArbChange>,
    max_changes: u8,
    max_bytes: u16,
}

/// Every accepted update is within every cap, routed (no rename or delete reaches the update),
/// credential-free, and made only of contained paths.
pub fn update_validation(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(input) = UpdateInput::arbitrary(&mut u) else {
        return;
    };
    let Ok(limits) = UpdateLimits::new(
        usize::from(input.max_changes.max(1)),
        usize::from(input.max_bytes.max(1)),
    ) else {
        return;
    };
    let changes: Vec<Change> = input
        .changes
        .into_iter()
        .map(|c| match c {
            ArbChange::Add(p) => Change::Add { path: p.0 },
            ArbChange::Edit(p) => Change::Edit { path: p.0 },
            ArbChange::Rename(a, b) => Change::Rename {
                old_path: a.0,
                path: b.0,
            },
            ArbChange::Delete(p) => Change::Delete { path: p.0 },
        })
        .collect();
    let request = UpdateRequest {
        repository_id: input.repository_id,
        worktree_id: input.worktree_id,
        source_revision: input.source_revision,
        changes,
    };
    let expected_removed: Vec<String> = request
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::Rename { old_path, .. } => Some(old_path.clone()),
            Change::Delete { path } => Some(path.clone()),
            _ => None,
        })
        .collect();
    match validate_update(request.clone(), &limits) {
        Err(e) => assert!(
            matches!(e.code(), ErrorCode::Limit | ErrorCode::Untrusted),
            "{e}"
        ),
        Ok(routed) => {
            assert!(request.changes.len() <= limits.max_changes());
            assert!(update_bytes(&request) <= limits.max_bytes());
            for id in [
                &request.repository_id,
                &request.worktree_id,
                &request.source_revision,
            ] {
                assert!(!id.is_empty() && id.len() <= MAX_ID_BYTES);
                assert!(!id.chars().any(char::is_control));
                if let Some(i) = id.find("://") {
                    let after = &id[i + 3..];
                    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
                    assert!(!after[..end].contains('@'), "credentials in {id:?}");
                }
            }
            for c in &routed.update.changes {
                assert!(
                    matches!(c, Change::Add { .. } | Change::Edit { .. }),
                    "{c:?} reached the update"
                );
                assert!(reference_contained(c.path()));
            }
            let removed = routed.removals.map(|r| r.paths).unwrap_or_default();
            assert_eq!(removed, expected_removed);
            for p in &removed {
                assert!(reference_contained(p));
            }
        }
    }
}

fn tool() -> &'static repo_search_tool::RepoSearchTool {
    static TOOL: OnceLock<repo_search_tool::RepoSearchTool> = OnceLock::new();
    TOOL.get_or_init(|| {
        let dir = std::env::temp_dir();
        let ops = literal_search::LiteralSearch::new(&dir).expect("temp dir is a directory");
        repo_search_tool::RepoSearchTool::new(std::sync::Arc::new(ops), &[SearchMode::Literal])
            .expect("literal is allowed")
    })
}

/// The tool's own input schema, compiled by a real JSON Schema 2020-12 validator.
fn tool_schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        jsonschema::draft202012::new(&tool().schema()).expect("the tool's schema compiles")
    })
}

/// The tool's argument parsing never panics on any JSON, and what it accepts obeys its schema's
/// rules: every accepted object is valid against the schema it advertises, checked by a real
/// validator, so an option added to the schema needs no edit here.
pub fn tool_arguments(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let tool = tool();
    match tool.parse_arguments(&value) {
        Err(e) => {
            assert!(matches!(
                e.code(),
                ErrorCode::Unsupported | ErrorCode::Limit | ErrorCode::Untrusted
            ));
            assert!(!e.to_string().is_empty());
        }
        Ok(req) => {
            let errors: Vec<String> = tool_schema()
                .iter_errors(&value)
                .map(|e| e.to_string())
                .collect();
            assert!(
                errors.is_empty(),
                "accepted arguments the schema refuses: {errors:?}"
            );
            assert!(
                !req.query.is_empty()
                    && req.query.chars().count() <= repo_search_tool::MAX_QUERY_CHARS
            );
            assert!(!req.query.contains(['\n', '\r', '\0']));
            assert!(tool.modes().contains(&req.mode));
            if let Some(n) = req.max_results {
                assert!((1..=1000).contains(&n));
            }
            if let Some(p) = &req.path {
                assert!(Scope::parse(Some(p)).is_ok());
            }
        }
    }
}
