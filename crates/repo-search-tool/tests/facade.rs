//! Every path through the facade, end to end through the tool's JSON, driven by one `check`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use index_contract::{
    BackendHit, Change, ErrorCode, IndexState, IndexStatus, RemoveRequest, SearchMode,
    SearchRequest, UnixMillis, UpdateRequest,
    limits::{SearchLimits, StalePolicy, UpdateLimits},
};
use index_testkit::{Behaviour, CountingOperations, FixtureBackend};
use literal_search::LiteralSearch;
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations, RepoSearchTool};
use serde_json::{Value, json};

const FILES: [(&str, &str); 3] = [
    ("src/main.rs", "fn main() {\n    run();\n}\n"),
    ("src/lib.rs", "pub fn run() {}\n"),
    ("README.md", "run the tool\n"),
];

struct Setup {
    _dir: tempfile::TempDir,
    backend: Arc<FixtureBackend>,
    fallback: Arc<CountingOperations<LiteralSearch>>,
    ops: Arc<IndexedRepositoryOperations>,
    tool: RepoSearchTool,
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn setup_with(backend: FixtureBackend, config: IndexedOperationsConfig) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    for (p, c) in FILES {
        std::fs::create_dir_all(dir.path().join(p).parent().unwrap()).unwrap();
        std::fs::write(dir.path().join(p), c).unwrap();
    }
    let backend = Arc::new(backend);
    let fallback = Arc::new(CountingOperations::new(
        LiteralSearch::new(dir.path()).unwrap(),
    ));
    let modes = config.allowed_modes.clone();
    let ops = Arc::new(
        IndexedRepositoryOperations::new(dir.path(), backend.clone(), fallback.clone(), config)
            .unwrap(),
    );
    let tool = RepoSearchTool::new(ops.clone(), &modes).unwrap();
    Setup {
        _dir: dir,
        backend,
        fallback,
        ops,
        tool,
    }
}

fn setup(behaviour: Behaviour) -> Setup {
    setup_with(
        FixtureBackend::ready(FILES).with_behaviour(behaviour),
        short_deadline(),
    )
}

fn short_deadline() -> IndexedOperationsConfig {
    IndexedOperationsConfig {
        limits: SearchLimits::new(1000, 4096, Duration::from_millis(300)).unwrap(),
        ..Default::default()
    }
}

#[derive(Debug)]
enum Expect {
    /// Hits with these paths, in order, stamped as untrusted with this provenance revision.
    Hits(&'static [&'static str], Option<&'static str>),
    Code(ErrorCode),
}

/// Runs `args` through the tool and checks the JSON; also checks the fallback never ran for an
/// index query (no silent fallback) and that no error carries backend text.
fn check(s: &Setup, args: Value, expected: Expect) -> Value {
    let rt = rt();
    let before = s.fallback.searches();
    let out = rt.block_on(s.tool.call(&args));
    // A backend that blocks its thread keeps running after the timeout; do not wait for it here.
    rt.shutdown_background();
    if args["mode"] != "literal" && args.get("mode").is_some() {
        assert_eq!(
            s.fallback.searches(),
            before,
            "an index query reached the literal fallback"
        );
    }
    match (out, expected) {
        (Ok(v), Expect::Hits(paths, rev)) => {
            let got: Vec<_> = v["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["path"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(got, paths, "{v}");
            assert_eq!(v["untrusted_index"], true);
            assert_eq!(v["indexed"]["state"], "ready");
            assert_eq!(v["indexed"]["source_revision"], json!(rev));
            assert_eq!(v["indexed"]["mode"], v["mode"]);
            for h in v["hits"].as_array().unwrap() {
                let score = h["score"].as_f64().unwrap();
                assert!((0.0..=1.0).contains(&score));
            }
            v
        }
        (Err(e), Expect::Code(code)) => {
            assert_eq!(e.code, code, "{}", e.message);
            assert!(
                !e.message.contains("SECRET"),
                "backend text leaked: {}",
                e.message
            );
            serde_json::to_value(e).unwrap()
        }
        (got, want) => panic!("{args}: expected {want:?}, got {got:?}"),
    }
}

fn indexed(query: &str) -> Value {
    json!({"query": query, "mode": "indexed_literal"})
}

fn status(state: IndexState, age_ms: i64, rev: Option<&str>) -> IndexStatus {
    IndexStatus {
        state,
        source_revision: rev.map(str::to_owned),
        updated_at: Some(UnixMillis((UnixMillis::now().0 as i64 - age_ms) as u64)),
    }
}

fn bad_hit(path: &str, score: f64) -> BackendHit {
    BackendHit {
        path: path.into(),
        line: 1,
        column: 1,
        snippet: "x".into(),
        score,
        count: None,
        before: Vec::new(),
        after: Vec::new(),
    }
}

#[test]
fn ready_backend_serves_untrusted_hits_with_provenance() {
    check(
        &setup(Behaviour::Honest),
        indexed("run"),
        Expect::Hits(&["README.md", "src/lib.rs", "src/main.rs"], Some("rev-0")),
    );
}

#[test]
fn scoped_query_reaches_the_backend_canonical_and_hits_stay_inside() {
    let s = setup(Behaviour::Honest);
    check(
        &s,
        json!({"query": "run", "mode": "indexed_literal", "path": "src/"}),
        Expect::Hits(&["src/lib.rs", "src/main.rs"], Some("rev-0")),
    );
}

#[test]
fn empty_and_building_states_are_stale() {
    for state in [IndexState::Empty, IndexState::Building, IndexState::Stale] {
        check(
            &setup(Behaviour::Status(status(state, 0, Some("r")))),
            indexed("run"),
            Expect::Code(ErrorCode::Stale),
        );
    }
}

#[test]
fn old_future_or_missing_timestamps_and_revisions_are_stale() {
    check(
        &setup(Behaviour::Status(status(
            IndexState::Ready,
            61_000,
            Some("r"),
        ))),
        indexed("run"),
        Expect::Code(ErrorCode::Stale),
    );
    check(
        &setup(Behaviour::Status(status(
            IndexState::Ready,
            -3_600_000,
            Some("r"),
        ))),
        indexed("run"),
        Expect::Code(ErrorCode::Stale),
    );
    check(
        &setup(Behaviour::Status(status(IndexState::Ready, 0, None))),
        indexed("run"),
        Expect::Code(ErrorCode::Stale),
    );
    let mut no_time = status(IndexState::Ready, 0, Some("r"));
    no_time.updated_at = None;
    check(
        &setup(Behaviour::Status(no_time)),
        indexed("run"),
        Expect::Code(ErrorCode::Stale),
    );
}

#[test]
fn revision_is_optional_when_the_policy_says_so() {
    let config = IndexedOperationsConfig {
        stale: StalePolicy::new(Duration::from_secs(60), false).unwrap(),
        ..short_deadline()
    };
    let s = setup_with(
        FixtureBackend::ready(FILES).with_behaviour(Behaviour::Status(status(
            IndexState::Ready,
            0,
            None,
        ))),
        config,
    );
    let v = check(&s, indexed("fn run"), Expect::Hits(&["src/lib.rs"], None));
    assert_eq!(v["indexed"]["source_revision"], Value::Null);
}

#[test]
fn search_response_status_is_judged_and_stamped_not_the_earlier_status() {
    // The status read before the query was fresh, but the version searched is not.
    check(
        &setup(Behaviour::ResponseStatus(status(
            IndexState::Building,
            0,
            Some("r"),
        ))),
        indexed("run"),
        Expect::Code(ErrorCode::Stale),
    );
    check(
        &setup(Behaviour::ResponseStatus(status(
            IndexState::Ready,
            120_000,
            Some("r"),
        ))),
        indexed("run"),
        Expect::Code(ErrorCode::Stale),
    );
    // A concurrent update moved the index on: the provenance names the version the hits came from.
    check(
        &setup(Behaviour::ResponseStatus(status(
            IndexState::Ready,
            0,
            Some("rev-9"),
        ))),
        indexed("fn run"),
        Expect::Hits(&["src/lib.rs"], Some("rev-9")),
    );
}

#[test]
fn failed_index_is_failed() {
    check(
        &setup(Behaviour::Status(status(IndexState::Failed, 0, Some("r")))),
        indexed("run"),
        Expect::Code(ErrorCode::Failed),
    );
}

#[test]
fn hostile_paths_and_bad_scores_are_untrusted() {
    for hits in [
        vec![bad_hit("src/a.rs", 0.5), bad_hit("../../etc/passwd", 0.5)],
        vec![bad_hit("/etc/passwd", 0.5)],
        vec![bad_hit("src\\a.rs", 0.5)],
        vec![bad_hit("src/a.rs", f64::NAN)],
        vec![bad_hit("src/a.rs", 1.5)],
    ] {
        check(
            &setup(Behaviour::Hits(hits)),
            indexed("run"),
            Expect::Code(ErrorCode::Untrusted),
        );
    }
    // A hit outside the requested scope.
    check(
        &setup(Behaviour::Hits(vec![bad_hit("srcx/a.rs", 0.5)])),
        json!({"query": "run", "mode": "indexed_literal", "path": "src"}),
        Expect::Code(ErrorCode::Untrusted),
    );
}

#[test]
fn duplicates_are_dropped_and_snippets_and_counts_capped() {
    let mut long = bad_hit("a", 0.9);
    long.snippet = "é".repeat(5000);
    let hits = vec![
        long,
        bad_hit("a", 0.1),
        bad_hit("b", 0.5),
        bad_hit("c", 0.5),
    ];
    let s = setup(Behaviour::Hits(hits));
    let v = check(
        &s,
        json!({"query": "x", "mode": "indexed_literal", "max_results": 2}),
        Expect::Hits(&["a", "b"], Some("rev-0")),
    );
    assert_eq!(v["hits"][0]["snippet_truncated"], true);
    assert_eq!(v["hits"][0]["snippet"].as_str().unwrap().len(), 4096);
    assert_eq!(v["complete"], false);
    assert_eq!(v["stopped"], "max_results");
    assert_eq!(v["stats"]["duplicates_removed"], 1);
}

#[test]
fn backend_error_is_failed_without_its_text() {
    check(
        &setup(Behaviour::Error("SECRET /home/user/.ssh/id_rsa".into())),
        indexed("run"),
        Expect::Code(ErrorCode::Failed),
    );
}

#[test]
fn backend_panic_is_failed() {
    // Under the default deadline: a panic's report (a symbolised backtrace when RUST_BACKTRACE
    // asks for one) took more than the short deadline's 300 ms on a loaded machine, and the
    // answer was then `TIMEOUT`. This test is about the panic, not the clock.
    for behaviour in [Behaviour::Panic, Behaviour::PanicInStatus] {
        check(
            &setup_with(
                FixtureBackend::ready(FILES).with_behaviour(behaviour),
                IndexedOperationsConfig::default(),
            ),
            indexed("run"),
            Expect::Code(ErrorCode::Failed),
        );
    }
}

#[test]
fn slow_or_silent_backend_times_out_within_the_deadline() {
    for behaviour in [Behaviour::Never, Behaviour::Slow(Duration::from_secs(2))] {
        let s = setup(behaviour);
        let started = Instant::now();
        check(&s, indexed("run"), Expect::Code(ErrorCode::Timeout));
        let took = started.elapsed();
        assert!(took < Duration::from_millis(300 + 150), "took {took:?}");
    }
}

#[test]
fn an_answer_that_comes_after_the_deadline_is_a_timeout_on_a_runtime_of_one_thread() {
    // The backend blocks its thread past the deadline, so no timer can fire meanwhile (the
    // one-shot CLI runs such a runtime): its late answer must still be a timeout.
    let s = setup(Behaviour::Slow(Duration::from_millis(600)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let req = SearchRequest::new("run", SearchMode::IndexedLiteral);
    let err = rt.block_on(s.tool.call_request(req)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout);
}

#[test]
fn cancel_is_timeout() {
    let s = setup(Behaviour::Never);
    let rt = rt();
    let req = SearchRequest::new("run", SearchMode::IndexedLiteral);
    let signal = req.signal.clone();
    let err = rt.block_on(async {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            signal.cancel();
        });
        s.tool.call_request(req).await.unwrap_err()
    });
    assert_eq!(err.code(), ErrorCode::Timeout);
}

#[test]
fn modes_not_allowed_or_not_declared_are_unsupported() {
    let s = setup(Behaviour::Honest);
    check(
        &s,
        json!({"query": "run", "mode": "semantic"}),
        Expect::Code(ErrorCode::Unsupported),
    );
    // Allowing semantic without a backend that declares it is refused when the facade is built.
    let dir = tempfile::tempdir().unwrap();
    let err = IndexedRepositoryOperations::new(
        dir.path(),
        Arc::new(FixtureBackend::ready(FILES)),
        Arc::new(LiteralSearch::new(dir.path()).unwrap()),
        IndexedOperationsConfig {
            allowed_modes: SearchMode::ALL.to_vec(),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unsupported);
    // A host that allows only literal: the index modes are unsupported even called directly.
    let s = setup_with(
        FixtureBackend::ready(FILES),
        IndexedOperationsConfig {
            allowed_modes: vec![SearchMode::Literal],
            ..Default::default()
        },
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    use index_contract::RepositoryOperations;
    let err = rt
        .block_on(
            s.ops
                .search(SearchRequest::new("run", SearchMode::IndexedLiteral)),
        )
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unsupported);
    assert_eq!(s.backend.calls().search, 0);
}

#[test]
fn semantic_capable_backend_serves_semantic() {
    let s = setup_with(
        FixtureBackend::ready(FILES).with_semantic(true),
        IndexedOperationsConfig {
            allowed_modes: SearchMode::ALL.to_vec(),
            ..short_deadline()
        },
    );
    let v = check(
        &s,
        json!({"query": "fn run", "mode": "semantic"}),
        Expect::Hits(&["src/lib.rs"], Some("rev-0")),
    );
    assert_eq!(v["indexed"]["mode"], "semantic");
}

#[test]
fn escaping_scope_is_refused_before_the_backend_is_called() {
    let s = setup(Behaviour::Honest);
    check(
        &s,
        json!({"query": "run", "mode": "indexed_literal", "path": "../x"}),
        Expect::Code(ErrorCode::Untrusted),
    );
    assert_eq!(s.backend.calls().search, 0);
    assert_eq!(s.backend.calls().status, 0);
}

#[test]
fn dispose_is_idempotent_and_leaves_literal_working() {
    let s = setup(Behaviour::Honest);
    let rt = rt();
    rt.block_on(async {
        s.ops.index().dispose().await.unwrap();
        s.ops.index().dispose().await.unwrap();
    });
    assert_eq!(s.backend.calls().dispose, 1);
    check(&s, indexed("run"), Expect::Code(ErrorCode::Unsupported));
    let v = rt
        .block_on(s.tool.call(&json!({"query": "fn run", "mode": "literal"})))
        .unwrap();
    assert_eq!(v["hits"][0]["path"], "src/lib.rs");
    let err = rt.block_on(s.ops.index().status()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unsupported);
}

fn upd(changes: Vec<Change>) -> UpdateRequest {
    UpdateRequest {
        repository_id: "repo".into(),
        worktree_id: "wt".into(),
        source_revision: "rev-1".into(),
        changes,
    }
}

#[test]
fn update_is_validated_before_any_backend_call_and_routed() {
    let config = IndexedOperationsConfig {
        update_limits: UpdateLimits::new(2, 1 << 20).unwrap(),
        ..Default::default()
    };
    let s = setup_with(FixtureBackend::ready(FILES), config);
    let rt = rt();
    let index = s.ops.index();
    let over = upd((0..3)
        .map(|i| Change::Add {
            path: format!("f{i}"),
        })
        .collect());
    assert_eq!(
        rt.block_on(index.update(over)).unwrap_err().code(),
        ErrorCode::Limit
    );
    let mut creds = upd(vec![]);
    creds.repository_id = "https://u:SECRET@host/r".into();
    assert_eq!(
        rt.block_on(index.update(creds)).unwrap_err().code(),
        ErrorCode::Untrusted
    );
    let escape = upd(vec![Change::Edit {
        path: "../x".into(),
    }]);
    assert_eq!(
        rt.block_on(index.update(escape)).unwrap_err().code(),
        ErrorCode::Untrusted
    );
    let too_many = RemoveRequest::new(vec!["a".into(), "b".into(), "c".into()]);
    assert_eq!(
        rt.block_on(index.remove(too_many)).unwrap_err().code(),
        ErrorCode::Limit
    );
    assert_eq!(
        s.backend.calls().update + s.backend.calls().remove,
        0,
        "a refusal reached the backend"
    );

    rt.block_on(index.update(upd(vec![
        Change::Rename {
            old_path: "src/lib.rs".into(),
            path: "src/core.rs".into(),
        },
        Change::Delete {
            path: "README.md".into(),
        },
    ])))
    .unwrap();
    assert_eq!(
        s.backend.removals(),
        [RemoveRequest {
            paths: vec!["src/lib.rs".into(), "README.md".into()],
            update_follows: true,
        }]
    );
    assert_eq!(
        s.backend.updates()[0].changes,
        [Change::Add {
            path: "src/core.rs".into()
        }]
    );
    assert_eq!(s.backend.paths(), ["src/core.rs", "src/main.rs"]);
    let st = rt.block_on(index.status()).unwrap();
    assert_eq!(st.source_revision.as_deref(), Some("rev-1"));
}

#[test]
fn literal_through_the_facade_is_byte_identical_to_the_bare_fallback() {
    let rt = rt();
    let mut compared = 0;
    for seed in [1, 2] {
        let (tree, _outside) = index_testkit::tree::generated_tree(seed);
        let bare = Arc::new(LiteralSearch::new(tree.path()).unwrap());
        let facade = Arc::new(
            IndexedRepositoryOperations::new(
                tree.path(),
                Arc::new(FixtureBackend::ready(FILES)),
                bare.clone(),
                IndexedOperationsConfig::default(),
            )
            .unwrap(),
        );
        let bare_tool = RepoSearchTool::literal_only(bare);
        let facade_tool =
            RepoSearchTool::new(facade, &[SearchMode::Literal, SearchMode::IndexedLiteral])
                .unwrap();
        for q in [
            "fn main",
            "main",
            "café",
            "x",
            "search",
            "nothing-matches-this",
        ] {
            for args in [
                json!({"query": q}),
                json!({"query": q, "mode": "literal", "case_insensitive": true}),
                json!({"query": q, "path": "src", "max_results": 3}),
                json!({"query": q, "path": "../escape"}),
            ] {
                let a = rt.block_on(bare_tool.call(&args));
                let b = rt.block_on(facade_tool.call(&args));
                let a =
                    serde_json::to_vec(&a.map_err(|e| serde_json::to_value(e).unwrap())).unwrap();
                let b =
                    serde_json::to_vec(&b.map_err(|e| serde_json::to_value(e).unwrap())).unwrap();
                assert_eq!(a, b, "{args}");
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 48);
}

#[test]
fn index_pages_concatenate_to_the_uncapped_answer_and_a_change_between_pages_is_stale() {
    let files: Vec<(String, String)> = (0..7)
        .map(|i| (format!("src/f{i}.rs"), "fn run() {}\n".to_owned()))
        .collect();
    let s = setup_with(FixtureBackend::ready(files.clone()), short_deadline());
    let whole = check(
        &s,
        indexed("run"),
        Expect::Hits(
            &[
                "src/f0.rs",
                "src/f1.rs",
                "src/f2.rs",
                "src/f3.rs",
                "src/f4.rs",
                "src/f5.rs",
                "src/f6.rs",
            ],
            Some("rev-0"),
        ),
    );
    assert_eq!(whole.get("next_offset"), None);
    let mut pages = Vec::new();
    let mut args = json!({"query": "run", "mode": "indexed_literal", "max_results": 3});
    loop {
        let v = rt().block_on(s.tool.call(&args)).unwrap();
        pages.extend(v["hits"].as_array().unwrap().iter().cloned());
        let Some(next) = v.get("next_offset") else {
            assert_eq!(v["complete"], true, "{v}");
            break;
        };
        assert_eq!(v["complete"], false);
        assert_eq!(v["stopped"], "max_results");
        args["offset"] = next.clone();
        args["page_token"] = v["page_token"].clone();
    }
    assert_eq!(Value::Array(pages), whole["hits"]);

    // The first page, then an update before the second: the index attests a new revision, so
    // the second page fails instead of shifting.
    let first = rt()
        .block_on(
            s.tool
                .call(&json!({"query": "run", "mode": "indexed_literal", "max_results": 3})),
        )
        .unwrap();
    rt().block_on(s.ops.index().update(UpdateRequest {
        repository_id: "r".into(),
        worktree_id: "w".into(),
        source_revision: "rev-1".into(),
        changes: vec![Change::Edit {
            path: "src/f0.rs".into(),
        }],
    }))
    .unwrap();
    check(
        &s,
        json!({"query": "run", "mode": "indexed_literal", "max_results": 3,
               "offset": first["next_offset"], "page_token": first["page_token"]}),
        Expect::Code(ErrorCode::Stale),
    );
}

#[test]
fn an_option_the_backend_does_not_declare_is_unsupported_before_the_backend_is_called() {
    let s = setup(Behaviour::Honest);
    for args in [
        json!({"query": "run", "mode": "indexed_literal", "regex": true}),
        json!({"query": "run", "mode": "indexed_literal", "glob": ["*.rs"]}),
        json!({"query": "run", "mode": "indexed_literal", "output": "count"}),
        json!({"query": "run", "mode": "indexed_literal", "context_after": 2}),
        json!({"query": "run", "mode": "indexed_literal", "include_hidden": true}),
    ] {
        let before = s.backend.calls();
        check(&s, args.clone(), Expect::Code(ErrorCode::Unsupported));
        assert_eq!(s.backend.calls(), before, "{args} reached the backend");
    }
}

#[test]
fn counts_and_context_lines_that_do_not_fit_the_request_are_untrusted() {
    let all = index_contract::BackendCapabilities {
        count: true,
        context: true,
        paging: true,
        ..Default::default()
    };
    let with = |edit: fn(&mut BackendHit)| {
        let mut h = bad_hit("src/a.rs", 0.5);
        h.line = 3;
        edit(&mut h);
        FixtureBackend::ready(FILES)
            .with_behaviour(Behaviour::Hits(vec![h]))
            .with_capabilities(all)
    };
    let count = json!({"query": "x", "mode": "indexed_literal", "output": "count"});
    let context = json!({"query": "x", "mode": "indexed_literal", "context_before": 1});
    for (backend, args, expected) in [
        (with(|h| h.count = Some(2)), count.clone(), None),
        (with(|_| {}), count.clone(), Some(ErrorCode::Untrusted)),
        (
            with(|h| h.count = Some(0)),
            count.clone(),
            Some(ErrorCode::Untrusted),
        ),
        (
            with(|h| h.count = Some(2)),
            indexed("x"),
            Some(ErrorCode::Untrusted),
        ),
        (with(|h| h.before = vec!["a".into()]), context.clone(), None),
        (
            with(|h| h.before = vec!["a".into(), "b".into()]),
            context.clone(),
            Some(ErrorCode::Untrusted),
        ),
        (
            with(|h| h.before = vec!["a\nb".into()]),
            context.clone(),
            Some(ErrorCode::Untrusted),
        ),
        (
            with(|h| h.after = vec!["a".into()]),
            context.clone(),
            Some(ErrorCode::Untrusted),
        ),
    ] {
        let s = setup_with(backend, short_deadline());
        match expected {
            None => {
                let v = check(&s, args.clone(), Expect::Hits(&["src/a.rs"], Some("rev-0")));
                if args["output"] == "count" {
                    assert_eq!(v["hits"][0]["count"], 2);
                } else {
                    assert_eq!(v["hits"][0]["before"], json!(["a"]));
                    assert_eq!(v["hits"][0]["after"], json!([]));
                }
            }
            Some(code) => {
                check(&s, args, Expect::Code(code));
            }
        }
    }
}
