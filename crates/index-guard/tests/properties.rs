//! Properties: whatever a backend returns, the gate's answer is either an error with the right
//! code or a result that satisfies every invariant.

use std::collections::HashSet;

use index_contract::{BackendHit, ErrorCode, IndexState, IndexStatus, SearchMode, UnixMillis};
use index_guard::{Scope, TrustContext, check_path, snippet_window, stamp, validate_hits};
use proptest::prelude::*;

fn path_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        // Mostly plausible paths, so that many answers are accepted and checked.
        "(src|lib|srcx|docs)(/[a-z.]{1,4}){0,3}",
        // Sometimes anything at all.
        ".{0,12}",
        Just("../x".to_owned()),
        Just("/abs".to_owned()),
    ]
}

fn score_strategy() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => 0.0f64..=1.0,
        1 => prop::num::f64::ANY,
    ]
}

fn hit_strategy() -> impl Strategy<Value = BackendHit> {
    (
        path_strategy(),
        0u64..4,
        0u64..4,
        ".{0,40}",
        score_strategy(),
    )
        .prop_map(|(path, line, column, snippet, score)| BackendHit {
            path,
            line,
            column,
            snippet,
            score,
            count: None,
            before: Vec::new(),
            after: Vec::new(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn gate_output_is_an_error_or_satisfies_every_invariant(
        hits in prop::collection::vec(hit_strategy(), 0..20),
        scope in prop_oneof![Just(None), Just(Some("src")), Just(Some("src/a"))],
        max_results in 1usize..8,
        snippet_bytes in 1usize..24,
    ) {
        let scope = Scope::parse(scope).unwrap();
        let ctx = TrustContext { scope: &scope, max_results, snippet_bytes, output: Default::default(), context: Default::default() };
        let any_bad = hits.iter().any(|h| {
            check_path(&h.path).is_err()
                || !scope.contains(&h.path)
                || !(h.score.is_finite() && (0.0..=1.0).contains(&h.score))
                || h.line == 0
                || h.column == 0
        });
        match validate_hits(hits.clone(), &ctx) {
            Err(e) => {
                prop_assert!(any_bad, "refused a clean answer: {e}");
                prop_assert_eq!(e.code(), ErrorCode::Untrusted);
            }
            Ok(trusted) => {
                prop_assert!(!any_bad, "accepted a hostile answer");
                prop_assert!(trusted.hits.len() <= max_results);
                let mut seen = HashSet::new();
                for h in &trusted.hits {
                    prop_assert!(check_path(&h.path).is_ok());
                    prop_assert!(scope.contains(&h.path));
                    let s = h.score.unwrap();
                    prop_assert!(s.is_finite() && (0.0..=1.0).contains(&s));
                    prop_assert!(seen.insert(h.path.clone()), "duplicate path");
                    prop_assert!(h.snippet.len() <= snippet_bytes);
                    // First wins: the kept hit is the first with its path.
                    let first = hits.iter().find(|b| b.path == h.path).unwrap();
                    prop_assert!(first.snippet.starts_with(&h.snippet));
                    prop_assert_eq!(h.snippet_truncated, first.snippet.len() > snippet_bytes);
                }
                let distinct: HashSet<_> = hits.iter().map(|h| &h.path).collect();
                prop_assert_eq!(trusted.capped, distinct.len() > max_results);
                let status = IndexStatus {
                    state: IndexState::Ready,
                    source_revision: Some("r".into()),
                    updated_at: Some(UnixMillis(1)),
                };
                let result = stamp(SearchMode::IndexedLiteral, &status, trusted, true);
                prop_assert_eq!(result.untrusted_index, Some(true));
                let prov = result.indexed.unwrap();
                prop_assert_eq!(prov.state, IndexState::Ready);
                prop_assert_eq!(prov.source_revision.as_deref(), Some("r"));
            }
        }
    }

    #[test]
    fn snippet_window_is_bounded_valid_and_shows_the_match(
        prefix in prop::collection::vec(any::<u8>(), 0..200),
        needle in "[a-z]{1,6}",
        suffix in prop::collection::vec(any::<u8>(), 0..200),
        cap in 8usize..64,
    ) {
        let mut line = prefix.clone();
        let start = line.len();
        line.extend_from_slice(needle.as_bytes());
        line.extend_from_slice(&suffix);
        let (snippet, truncated) = snippet_window(&line, start, start + needle.len(), cap);
        prop_assert!(snippet.len() <= cap);
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        if body.len() > cap {
            prop_assert!(truncated);
        }
        if !truncated {
            prop_assert_eq!(snippet, String::from_utf8_lossy(body).into_owned());
        } else if body.len() > cap && needle.len() + 12 <= cap && std::str::from_utf8(body).is_ok() {
            // With room to spare and valid text, the window shows the match.
            prop_assert!(snippet.contains(&needle));
        }
    }
}

#[test]
fn snippet_window_replaces_invalid_utf8_and_drops_the_terminator() {
    let (s, cut) = snippet_window(b"a\xffb\r\n", 0, 1, 100);
    assert_eq!(s, "a\u{FFFD}b");
    assert!(!cut);
}

#[test]
fn long_line_snippet_is_a_window_around_the_match() {
    let mut line = vec![b'x'; 10_000];
    line.extend_from_slice(b"NEEDLE");
    line.extend(vec![b'y'; 10_000]);
    let (s, cut) = snippet_window(&line, 10_000, 10_006, 64);
    assert!(cut);
    assert_eq!(s.len(), 64);
    assert!(s.contains("NEEDLE"), "{s}");
}

#[test]
fn config_above_hard_cap_is_refused_and_requests_are_clamped() {
    use index_contract::limits::*;
    use std::time::Duration;
    for err in [
        StalePolicy::new(Duration::from_millis(HARD_MAX_AGE_MS + 1), true).unwrap_err(),
        SearchLimits::new(HARD_MAX_RESULTS + 1, 1, Duration::from_secs(1)).unwrap_err(),
        SearchLimits::new(1, HARD_SNIPPET_BYTES + 1, Duration::from_secs(1)).unwrap_err(),
        SearchLimits::new(1, 1, Duration::from_millis(HARD_DEADLINE_MS + 1)).unwrap_err(),
        UpdateLimits::new(HARD_MAX_CHANGES + 1, 1).unwrap_err(),
        UpdateLimits::new(1, HARD_UPDATE_BYTES + 1).unwrap_err(),
        UpdateLimits::new(0, 1).unwrap_err(),
    ] {
        assert_eq!(err.code(), ErrorCode::Limit, "{err}");
    }
    let at_caps = SearchLimits::new(
        HARD_MAX_RESULTS,
        HARD_SNIPPET_BYTES,
        Duration::from_millis(HARD_DEADLINE_MS),
    )
    .unwrap();
    assert_eq!(at_caps.max_results(), HARD_MAX_RESULTS);
    let limits = SearchLimits::default();
    assert_eq!(limits.max_results(), DEFAULT_MAX_RESULTS);
    assert_eq!(limits.snippet_bytes(), DEFAULT_SNIPPET_BYTES);
    assert_eq!(
        limits.deadline(),
        Duration::from_millis(DEFAULT_DEADLINE_MS)
    );
    assert_eq!(limits.clamp_max_results(Some(50_000)), DEFAULT_MAX_RESULTS);
    assert_eq!(limits.clamp_max_results(Some(7)), 7);
    assert_eq!(limits.clamp_max_results(None), DEFAULT_MAX_RESULTS);
    assert_eq!(
        limits.clamp_deadline(Some(Duration::from_secs(500))),
        Duration::from_millis(DEFAULT_DEADLINE_MS)
    );
    assert_eq!(StalePolicy::default().max_age_ms(), DEFAULT_MAX_AGE_MS);
    assert_eq!(UpdateLimits::default().max_changes(), DEFAULT_MAX_CHANGES);
    assert_eq!(UpdateLimits::default().max_bytes(), DEFAULT_UPDATE_BYTES);
}

#[test]
fn error_codes_are_the_six_stable_strings() {
    let strings: Vec<_> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        strings,
        [
            "ERR_PRISM_INDEX_UNSUPPORTED",
            "ERR_PRISM_INDEX_STALE",
            "ERR_PRISM_INDEX_FAILED",
            "ERR_PRISM_INDEX_LIMIT",
            "ERR_PRISM_INDEX_TIMEOUT",
            "ERR_PRISM_INDEX_UNTRUSTED",
        ]
    );
    for c in ErrorCode::ALL {
        assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
    }
}
