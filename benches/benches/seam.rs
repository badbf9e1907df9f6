//! Criterion benches of the seam: the trust gate, the freshness check, update validation, and an
//! indexed query through the whole facade on the 100 000-file fixture.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use index_contract::{
    BackendHit, Change, IndexState, IndexStatus, RepositoryOperations, SearchMode, SearchRequest,
    UnixMillis, UpdateRequest,
    limits::{StalePolicy, UpdateLimits},
};
use index_guard::{Scope, TrustContext, check_freshness, validate_hits, validate_update};
use repo_search_benches::fixture::MetadataFixture;
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations};

fn hits(n: usize) -> Vec<BackendHit> {
    (0..n)
        .map(|i| BackendHit {
            path: format!("src/mod_{}/file_{i}.rs", i / 100),
            line: 10,
            column: 5,
            snippet: format!("pub fn item_{i}(input: &str) -> Result<(), Error> {{"),
            score: 0.5,
            count: None,
            before: Vec::new(),
            after: Vec::new(),
        })
        .collect()
}

fn guard(c: &mut Criterion) {
    let mut group = c.benchmark_group("trust gate");
    let scope = Scope::parse(Some("src")).expect("scope");
    for n in [1_000, 10_000] {
        let input = hits(n);
        group.bench_with_input(BenchmarkId::new("validate_hits", n), &input, |b, input| {
            let ctx = TrustContext {
                scope: &scope,
                max_results: n,
                snippet_bytes: 4096,
                output: Default::default(),
                context: Default::default(),
            };
            b.iter_batched(
                || input.clone(),
                |h| black_box(validate_hits(h, &ctx)),
                criterion::BatchSize::LargeInput,
            );
        });
    }
    group.finish();

    let status = IndexStatus {
        state: IndexState::Ready,
        source_revision: Some("0123456789abcdef0123456789abcdef01234567".into()),
        updated_at: Some(UnixMillis(1_800_000_000_000)),
    };
    let policy = StalePolicy::default();
    c.bench_function("freshness check", |b| {
        b.iter(|| {
            black_box(check_freshness(
                black_box(&status),
                &policy,
                UnixMillis(1_800_000_001_000),
            ))
        })
    });

    let request = UpdateRequest {
        repository_id: "repo".into(),
        worktree_id: "main".into(),
        source_revision: "0123456789abcdef".into(),
        changes: (0..10_000)
            .map(|i| match i % 4 {
                0 => Change::Rename {
                    old_path: format!("old/{i}.rs"),
                    path: format!("new/{i}.rs"),
                },
                1 => Change::Delete {
                    path: format!("gone/{i}.rs"),
                },
                _ => Change::Edit {
                    path: format!("src/mod_{}/file_{i}.rs", i / 100),
                },
            })
            .collect(),
    };
    let limits = UpdateLimits::new(10_000, 64 << 20).expect("limits");
    c.bench_function("validate_update 10000 changes", |b| {
        b.iter_batched(
            || request.clone(),
            |r| black_box(validate_update(r, &limits)),
            criterion::BatchSize::LargeInput,
        )
    });
}

fn facade(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = std::env::temp_dir();
    let ops = IndexedRepositoryOperations::new(
        &dir,
        Arc::new(MetadataFixture::new(100_000)),
        Arc::new(literal_search::LiteralSearch::new(&dir).expect("fallback")),
        IndexedOperationsConfig::default(),
    )
    .expect("facade");
    let mut group = c.benchmark_group("facade indexed query (100k fixture)");
    for (name, query) in [
        ("rare", "item_4242"),
        ("100 hits", "mod_42"),
        ("capped 1000", "lang_rs"),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                black_box(
                    rt.block_on(ops.search(SearchRequest::new(query, SearchMode::IndexedLiteral))),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, guard, facade);
criterion_main!(benches);
