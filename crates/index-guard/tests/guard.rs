//! Every row of the guard table in design.md §4 that the guard alone decides, each a named test
//! driven through one `check(input, expected)` helper. The rows the facade decides (backend error,
//! panic, deadline, cancel, literal pass-through) are in `repo-search-tool`'s tests.

use index_contract::{
    BackendCapabilities, BackendHit, Change, ErrorCode, IndexState, IndexStatus, RemoveRequest,
    SearchMode, UnixMillis, UpdateRequest,
    limits::{StalePolicy, UpdateLimits},
};
use index_guard::{
    RoutedUpdate, Scope, TrustContext, check_freshness, check_mode, parse_status, validate_hits,
    validate_update,
};

const NOW: UnixMillis = UnixMillis(1_800_000_000_000);

/// One input to the guard.
enum Input {
    Mode {
        mode: SearchMode,
        allowed: Vec<SearchMode>,
        semantic: bool,
    },
    Status {
        status: IndexStatus,
        policy: StalePolicy,
    },
    StatusJson(&'static str),
    Hits {
        hits: Vec<BackendHit>,
        scope: Option<&'static str>,
        max_results: usize,
        snippet_bytes: usize,
    },
    Update {
        request: UpdateRequest,
        limits: UpdateLimits,
    },
}

/// What the guard must answer.
#[derive(Debug, PartialEq)]
enum Expected {
    Ok,
    Code(ErrorCode),
    /// Accepted hits: (path, snippet, snippet_truncated), then whether the list was capped.
    Hits(Vec<(&'static str, &'static str, bool)>, bool),
    Routed(RoutedUpdate),
}

fn check(input: Input, expected: Expected) {
    let actual = match input {
        Input::Mode {
            mode,
            allowed,
            semantic,
        } => to_expected(check_mode(
            mode,
            &allowed,
            BackendCapabilities {
                semantic,
                ..BackendCapabilities::default()
            },
        )),
        Input::Status { status, policy } => to_expected(check_freshness(&status, &policy, NOW)),
        Input::StatusJson(json) => match parse_status(json.as_bytes()) {
            Ok(status) => to_expected(check_freshness(&status, &StalePolicy::default(), NOW)),
            Err(e) => Expected::Code(e.code()),
        },
        Input::Hits {
            hits,
            scope,
            max_results,
            snippet_bytes,
        } => {
            let scope = Scope::parse(scope).expect("test scopes are valid");
            let ctx = TrustContext {
                scope: &scope,
                max_results,
                snippet_bytes,
                output: Default::default(),
                context: Default::default(),
            };
            match validate_hits(hits, &ctx) {
                Ok(t) => {
                    let hits = t
                        .hits
                        .iter()
                        .map(|h| {
                            let path: &'static str = Box::leak(h.path.clone().into_boxed_str());
                            let snip: &'static str = Box::leak(h.snippet.clone().into_boxed_str());
                            (path, snip, h.snippet_truncated)
                        })
                        .collect();
                    Expected::Hits(hits, t.capped)
                }
                Err(e) => Expected::Code(e.code()),
            }
        }
        Input::Update { request, limits } => match validate_update(request, &limits) {
            Ok(r) => Expected::Routed(r),
            Err(e) => Expected::Code(e.code()),
        },
    };
    assert_eq!(actual, expected);
}

fn to_expected(r: Result<(), index_contract::IndexError>) -> Expected {
    match r {
        Ok(()) => Expected::Ok,
        Err(e) => Expected::Code(e.code()),
    }
}

fn status(state: IndexState, age_ms: Option<i64>, rev: Option<&str>) -> IndexStatus {
    IndexStatus {
        state,
        source_revision: rev.map(str::to_owned),
        updated_at: age_ms.map(|a| UnixMillis((NOW.0 as i64 - a) as u64)),
    }
}

fn fresh(state: IndexState) -> Input {
    Input::Status {
        status: status(state, Some(1_000), Some("rev1")),
        policy: StalePolicy::default(),
    }
}

fn hit(path: &str, score: f64) -> BackendHit {
    BackendHit {
        path: path.to_owned(),
        line: 3,
        column: 5,
        snippet: format!("text of {path}"),
        score,
        count: None,
        before: Vec::new(),
        after: Vec::new(),
    }
}

fn hits(hits: Vec<BackendHit>) -> Input {
    Input::Hits {
        hits,
        scope: None,
        max_results: 1000,
        snippet_bytes: 4096,
    }
}

fn update(changes: Vec<Change>) -> UpdateRequest {
    UpdateRequest {
        repository_id: "repo".into(),
        worktree_id: "main".into(),
        source_revision: "0123abcd".into(),
        changes,
    }
}

fn add(p: &str) -> Change {
    Change::Add { path: p.into() }
}

#[test]
fn mode_not_in_allowed_modes_is_unsupported() {
    check(
        Input::Mode {
            mode: SearchMode::IndexedLiteral,
            allowed: vec![SearchMode::Literal],
            semantic: true,
        },
        Expected::Code(ErrorCode::Unsupported),
    );
}

#[test]
fn allowed_mode_passes() {
    check(
        Input::Mode {
            mode: SearchMode::IndexedLiteral,
            allowed: vec![SearchMode::Literal, SearchMode::IndexedLiteral],
            semantic: false,
        },
        Expected::Ok,
    );
}

#[test]
fn semantic_without_declared_capability_is_unsupported() {
    check(
        Input::Mode {
            mode: SearchMode::Semantic,
            allowed: SearchMode::ALL.to_vec(),
            semantic: false,
        },
        Expected::Code(ErrorCode::Unsupported),
    );
    check(
        Input::Mode {
            mode: SearchMode::Semantic,
            allowed: SearchMode::ALL.to_vec(),
            semantic: true,
        },
        Expected::Ok,
    );
}

#[test]
fn empty_building_and_stale_states_are_stale() {
    for state in [IndexState::Empty, IndexState::Building, IndexState::Stale] {
        check(fresh(state), Expected::Code(ErrorCode::Stale));
    }
    check(fresh(IndexState::Ready), Expected::Ok);
}

#[test]
fn absent_updated_at_is_stale() {
    check(
        Input::Status {
            status: status(IndexState::Ready, None, Some("r")),
            policy: StalePolicy::default(),
        },
        Expected::Code(ErrorCode::Stale),
    );
}

#[test]
fn updated_at_older_than_max_age_is_stale() {
    let policy = StalePolicy::new(std::time::Duration::from_millis(10_000), false).unwrap();
    check(
        Input::Status {
            status: status(IndexState::Ready, Some(10_001), Some("r")),
            policy,
        },
        Expected::Code(ErrorCode::Stale),
    );
    check(
        Input::Status {
            status: status(IndexState::Ready, Some(10_000), Some("r")),
            policy,
        },
        Expected::Ok,
    );
}

#[test]
fn missing_source_revision_is_stale_when_required() {
    let required = StalePolicy::default();
    let optional = StalePolicy::new(std::time::Duration::from_secs(60), false).unwrap();
    for rev in [None, Some("")] {
        check(
            Input::Status {
                status: status(IndexState::Ready, Some(0), rev),
                policy: required,
            },
            Expected::Code(ErrorCode::Stale),
        );
        check(
            Input::Status {
                status: status(IndexState::Ready, Some(0), rev),
                policy: optional,
            },
            Expected::Ok,
        );
    }
}

#[test]
fn updated_at_in_the_future_beyond_skew_is_stale() {
    check(
        Input::Status {
            status: status(IndexState::Ready, Some(-5_001), Some("r")),
            policy: StalePolicy::default(),
        },
        Expected::Code(ErrorCode::Stale),
    );
    // Within the skew allowance it is served: clocks differ a little.
    check(
        Input::Status {
            status: status(IndexState::Ready, Some(-5_000), Some("r")),
            policy: StalePolicy::default(),
        },
        Expected::Ok,
    );
}

#[test]
fn failed_state_is_failed() {
    check(fresh(IndexState::Failed), Expected::Code(ErrorCode::Failed));
}

#[test]
fn unknown_or_unparseable_status_fails_closed() {
    for json in [
        r#"{"state":"warming","source_revision":"r","updated_at":1}"#,
        r#"{"state":"READY"}"#,
        r#"{"source_revision":"r"}"#,
        r#"not json"#,
        r#"{"state":"ready","updated_at":"yesterday"}"#,
    ] {
        check(Input::StatusJson(json), Expected::Code(ErrorCode::Failed));
    }
}

#[test]
fn attested_revision_with_control_characters_is_untrusted() {
    check(
        Input::Status {
            status: status(IndexState::Ready, Some(0), Some("abc\u{1b}[31m")),
            policy: StalePolicy::default(),
        },
        Expected::Code(ErrorCode::Untrusted),
    );
}

#[test]
fn hostile_hit_paths_are_untrusted() {
    for p in [
        "/etc/passwd",
        "C:/x",
        "\\\\server\\share",
        "a/../../b",
        "a\\b",
        "a\0b",
        "a//b",
        "",
    ] {
        check(
            hits(vec![hit("ok.rs", 0.5), hit(p, 0.5)]),
            Expected::Code(ErrorCode::Untrusted),
        );
    }
}

#[test]
fn git_internal_hit_paths_are_untrusted() {
    for p in [
        ".git/config",
        "a/.GIT/config",
        ".Git/hooks/x",
        "git~1/config",
        ".git./config",
    ] {
        check(
            hits(vec![hit("ok.rs", 0.5), hit(p, 0.5)]),
            Expected::Code(ErrorCode::Untrusted),
        );
    }
}

#[test]
fn cjk_and_ellipsis_hit_paths_are_served() {
    check(
        hits(vec![
            hit("说明：安装.md", 0.9),
            hit("第1章．概要.md", 0.8),
            hit("Loading….md", 0.7),
        ]),
        Expected::Hits(
            vec![
                ("说明：安装.md", "text of 说明：安装.md", false),
                ("第1章．概要.md", "text of 第1章．概要.md", false),
                ("Loading….md", "text of Loading….md", false),
            ],
            false,
        ),
    );
}

#[test]
fn hit_outside_scope_is_untrusted_component_wise() {
    let scoped = |p: &str| Input::Hits {
        hits: vec![hit(p, 0.1)],
        scope: Some("src"),
        max_results: 10,
        snippet_bytes: 100,
    };
    check(scoped("srcx/a.rs"), Expected::Code(ErrorCode::Untrusted));
    check(scoped("lib/a.rs"), Expected::Code(ErrorCode::Untrusted));
    check(
        scoped("src"),
        Expected::Hits(vec![("src", "text of src", false)], false),
    );
    check(
        scoped("src/a.rs"),
        Expected::Hits(vec![("src/a.rs", "text of src/a.rs", false)], false),
    );
}

#[test]
fn bad_scores_fail_the_whole_query() {
    for s in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0001,
        1.0001,
        -1.0,
    ] {
        check(
            hits(vec![hit("a", 0.5), hit("b", s)]),
            Expected::Code(ErrorCode::Untrusted),
        );
    }
    check(
        hits(vec![hit("a", 0.0), hit("b", 1.0)]),
        Expected::Hits(
            vec![("a", "text of a", false), ("b", "text of b", false)],
            false,
        ),
    );
}

#[test]
fn zero_line_or_column_is_untrusted() {
    let mut h = hit("a", 0.5);
    h.line = 0;
    check(hits(vec![h]), Expected::Code(ErrorCode::Untrusted));
    let mut h = hit("a", 0.5);
    h.column = 0;
    check(hits(vec![h]), Expected::Code(ErrorCode::Untrusted));
}

#[test]
fn duplicate_paths_are_deduped_first_wins() {
    let mut second = hit("a", 0.9);
    second.snippet = "second".into();
    check(
        hits(vec![hit("a", 0.5), second, hit("b", 0.4)]),
        Expected::Hits(
            vec![("a", "text of a", false), ("b", "text of b", false)],
            false,
        ),
    );
}

#[test]
fn snippet_over_cap_is_truncated_on_a_char_boundary() {
    let mut h = hit("a", 0.5);
    h.snippet = "ab€cd".into(); // '€' is 3 bytes: bytes 2..5
    check(
        Input::Hits {
            hits: vec![h],
            scope: None,
            max_results: 10,
            snippet_bytes: 4,
        },
        Expected::Hits(vec![("a", "ab", true)], false),
    );
}

#[test]
fn more_hits_than_cap_are_cut_and_marked() {
    check(
        Input::Hits {
            hits: vec![hit("a", 0.5), hit("b", 0.5), hit("c", 0.5)],
            scope: None,
            max_results: 2,
            snippet_bytes: 100,
        },
        Expected::Hits(
            vec![("a", "text of a", false), ("b", "text of b", false)],
            true,
        ),
    );
}

#[test]
fn hostile_hit_past_the_cap_still_fails_closed() {
    check(
        Input::Hits {
            hits: vec![hit("a", 0.5), hit("b", 0.5), hit("../c", 0.5)],
            scope: None,
            max_results: 1,
            snippet_bytes: 100,
        },
        Expected::Code(ErrorCode::Untrusted),
    );
}

#[test]
fn update_over_change_cap_is_limit() {
    let limits = UpdateLimits::new(3, 1 << 20).unwrap();
    check(
        Input::Update {
            request: update((0..4).map(|i| add(&format!("f{i}"))).collect()),
            limits,
        },
        Expected::Code(ErrorCode::Limit),
    );
}

#[test]
fn update_over_byte_cap_is_limit() {
    // Ids count: "repo" + "main" + "0123abcd" = 16 bytes, plus 10 bytes of path.
    let limits = UpdateLimits::new(10, 25).unwrap();
    check(
        Input::Update {
            request: update(vec![add("0123456789")]),
            limits,
        },
        Expected::Code(ErrorCode::Limit),
    );
    let limits = UpdateLimits::new(10, 26).unwrap();
    check(
        Input::Update {
            request: update(vec![add("0123456789")]),
            limits,
        },
        Expected::Routed(RoutedUpdate {
            removals: None,
            update: update(vec![add("0123456789")]),
        }),
    );
}

#[test]
fn update_ids_that_are_unbounded_or_carry_credentials_are_refused() {
    type SetId = fn(&mut UpdateRequest, String);
    let cases: Vec<(SetId, String, ErrorCode)> = vec![
        (
            |r, v| r.repository_id = v,
            "x".repeat(257),
            ErrorCode::Limit,
        ),
        (
            |r, v| r.repository_id = v,
            "https://user:ghp_secret@github.com/o/r".into(),
            ErrorCode::Untrusted,
        ),
        (
            |r, v| r.repository_id = v,
            "ssh://git@host/o/r".into(),
            ErrorCode::Untrusted,
        ),
        (
            |r, v| r.worktree_id = v,
            "main\nextra".into(),
            ErrorCode::Untrusted,
        ),
        (
            |r, v| r.worktree_id = v,
            String::new(),
            ErrorCode::Untrusted,
        ),
        (
            |r, v| r.source_revision = v,
            "abc\u{7f}".into(),
            ErrorCode::Untrusted,
        ),
        (
            |r, v| r.source_revision = v,
            "r".repeat(300),
            ErrorCode::Limit,
        ),
    ];
    for (set, value, code) in cases {
        let mut request = update(vec![]);
        set(&mut request, value);
        check(
            Input::Update {
                request,
                limits: UpdateLimits::default(),
            },
            Expected::Code(code),
        );
    }
    // A URL without userinfo is a fine id.
    let mut request = update(vec![]);
    request.repository_id = "https://github.com/o/r@v1".into();
    let expected = request.clone();
    check(
        Input::Update {
            request,
            limits: UpdateLimits::default(),
        },
        Expected::Routed(RoutedUpdate {
            removals: None,
            update: expected,
        }),
    );
}

#[test]
fn update_paths_pass_the_containment_check() {
    for change in [
        add("../x"),
        Change::Edit {
            path: "/abs".into(),
        },
        Change::Delete {
            path: "a\\b".into(),
        },
        Change::Rename {
            old_path: "../old".into(),
            path: "new".into(),
        },
        Change::Rename {
            old_path: "old".into(),
            path: "a//new".into(),
        },
    ] {
        check(
            Input::Update {
                request: update(vec![change]),
                limits: UpdateLimits::default(),
            },
            Expected::Code(ErrorCode::Untrusted),
        );
    }
}

#[test]
fn rename_routes_as_remove_plus_add_and_delete_routes_to_remove() {
    check(
        Input::Update {
            request: update(vec![
                add("a"),
                Change::Rename {
                    old_path: "old".into(),
                    path: "new".into(),
                },
                Change::Delete {
                    path: "gone".into(),
                },
                Change::Edit { path: "e".into() },
            ]),
            limits: UpdateLimits::default(),
        },
        Expected::Routed(RoutedUpdate {
            removals: Some(RemoveRequest {
                paths: vec!["old".into(), "gone".into()],
                update_follows: true,
            }),
            update: update(vec![
                add("a"),
                add("new"),
                Change::Edit { path: "e".into() },
            ]),
        }),
    );
}
