//! Criterion bench of the literal fallback on a generated tree (the side-by-side comparison with
//! `rg` is `cargo xtask bench --literal`, which runs both as processes in one run).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use index_contract::{SearchMode, SearchRequest};
use literal_search::LiteralSearch;
use repo_search_benches::tree;

fn literal(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    tree::generate(dir.path(), 2_000).expect("tree");
    let search = LiteralSearch::new(dir.path()).expect("search");
    let mut group = c.benchmark_group("literal fallback (2000 files, 9 MB)");
    for (name, query) in [("rare", tree::RARE), ("common, capped 1000", tree::COMMON)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                black_box(search.search_blocking(&SearchRequest::new(query, SearchMode::Literal)))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, literal);
criterion_main!(benches);
