//! The specification's scale evidence, measured through the full facade (guard included).

use std::sync::Arc;
use std::time::{Duration, Instant};

use index_contract::{
    Change, ErrorCode, RepositoryOperations, SearchMode, SearchRequest, UpdateRequest,
    limits::SearchLimits,
};
use literal_search::LiteralSearch;
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations};
use serde::Serialize;

use crate::alloc;
use crate::fixture::{MetadataFixture, SEMANTIC_DEADLINE};

/// What to measure.
#[derive(Debug, Clone)]
pub struct ScaleConfig {
    /// Files in the metadata fixture (the specification: 100 000).
    pub files: usize,
    /// Indexed queries to time.
    pub queries: usize,
    /// Files in the generated tree for the literal baseline.
    pub literal_files: usize,
    /// Interleaved literal runs per side.
    pub literal_runs: usize,
}

impl Default for ScaleConfig {
    fn default() -> Self {
        ScaleConfig {
            files: 100_000,
            queries: 400,
            literal_files: 2_000,
            literal_runs: 15,
        }
    }
}

/// Every figure of the check.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    /// Files in the fixture.
    pub files: usize,
    /// Cores on this machine.
    pub cores: usize,
    /// Indexed query latency, p50, in ms.
    pub query_p50_ms: f64,
    /// Indexed query latency, p95, in ms.
    pub query_p95_ms: f64,
    /// Indexed query latency, max, in ms.
    pub query_max_ms: f64,
    /// One 1000-change batch update, in ms.
    pub update_ms: f64,
    /// Peak heap over the baseline during queries and the update, in bytes (0 when the counting
    /// allocator is not installed).
    pub peak_heap_bytes: usize,
    /// Time for a query to a semantic backend that never answers to return, in ms.
    pub semantic_timeout_ms: f64,
    /// The deadline it was given, in ms.
    pub semantic_deadline_ms: f64,
    /// Whether it failed with `ErrorCode::Timeout`.
    pub semantic_timeout_code_ok: bool,
    /// Hits returned when a semantic backend floods 20 000 hits at a cap of 1000.
    pub semantic_flood_hits: usize,
    /// Literal results through the facade are byte-identical to the bare fallback's.
    pub literal_identical: bool,
    /// Median literal time through the facade, in ms.
    pub literal_facade_median_ms: f64,
    /// Median literal time of the bare fallback, in ms.
    pub literal_bare_median_ms: f64,
    /// The median, over back-to-back pairs of one facade run and one bare run, of the facade's
    /// time over the bare fallback's: the machine's drift and load fall on both runs of a pair
    /// alike, so this ratio is steadier than the ratio of the two medians.
    pub literal_pair_ratio_median: f64,
}

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// What is measured.
    pub name: &'static str,
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
    /// The specification's bar (the value must not exceed it).
    pub spec_bar: f64,
    /// Our own, tighter target.
    pub target: f64,
}

impl Figure {
    /// Meets the specification's bar.
    pub fn spec_ok(&self) -> bool {
        self.value <= self.spec_bar
    }

    /// Meets our target.
    pub fn target_ok(&self) -> bool {
        self.value <= self.target
    }
}

impl ScaleReport {
    /// The figures with their bars and targets.
    pub fn figures(&self) -> Vec<Figure> {
        let mib = (1024 * 1024) as f64;
        vec![
            Figure {
                name: "indexed query p95",
                value: self.query_p95_ms,
                unit: "ms",
                spec_bar: 250.0,
                target: 10.0,
            },
            Figure {
                name: "1000-file batch update",
                value: self.update_ms,
                unit: "ms",
                spec_bar: 1000.0,
                target: 100.0,
            },
            Figure {
                name: "peak heap over baseline",
                value: self.peak_heap_bytes as f64 / mib,
                unit: "MiB",
                spec_bar: 64.0,
                target: 16.0,
            },
            Figure {
                name: "semantic never-answering: overshoot past deadline",
                value: self.semantic_timeout_ms - self.semantic_deadline_ms,
                unit: "ms",
                spec_bar: 50.0,
                target: 10.0,
            },
            Figure {
                name: "literal via facade / bare fallback (median of pairs)",
                value: self.literal_pair_ratio_median,
                unit: "x",
                spec_bar: 1.05,
                target: 1.05,
            },
        ]
    }

    /// The checks that are pass/fail rather than figures.
    pub fn checks(&self) -> Vec<(&'static str, bool)> {
        vec![
            (
                "semantic never-answering fails with the timeout code",
                self.semantic_timeout_code_ok,
            ),
            (
                "semantic flood of 20000 hits is capped at 1000",
                self.semantic_flood_hits == 1000,
            ),
            (
                "literal via facade is byte-identical to the bare fallback",
                self.literal_identical,
            ),
        ]
    }

    /// Whether every bar of the specification is met.
    pub fn spec_ok(&self) -> bool {
        self.figures().iter().all(Figure::spec_ok) && self.checks().iter().all(|c| c.1)
    }

    /// A plain-text table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "scale check: {} files, {} cores; indexed query p50 {:.3} ms, max {:.3} ms\n",
            self.files, self.cores, self.query_p50_ms, self.query_max_ms
        );
        s.push_str(&format!(
            "{:<52} {:>10} {:>5} {:>9} {:>9}  spec  target\n",
            "figure", "value", "", "spec bar", "target"
        ));
        for f in self.figures() {
            s.push_str(&format!(
                "{:<52} {:>10.3} {:>5} {:>9} {:>9}  {:<4}  {}\n",
                f.name,
                f.value,
                f.unit,
                f.spec_bar,
                f.target,
                if f.spec_ok() { "ok" } else { "MISS" },
                if f.target_ok() { "met" } else { "not met" }
            ));
        }
        for (name, ok) in self.checks() {
            s.push_str(&format!(
                "{name:<52} {:>10}\n",
                if ok { "ok" } else { "FAIL" }
            ));
        }
        s
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the whole check. Needs a writable temp dir for the literal baseline tree.
pub fn run(config: &ScaleConfig) -> std::io::Result<ScaleReport> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let dir = tempfile_dir()?;
    crate::tree::generate(dir.path(), config.literal_files)?;
    let bare = Arc::new(LiteralSearch::new(dir.path())?);

    // The fixture is the host's memory, not the seam's: the baseline is taken after it is built.
    let fixture = Arc::new(MetadataFixture::new(config.files));
    let ops = IndexedRepositoryOperations::new(
        dir.path(),
        fixture.clone(),
        bare.clone(),
        IndexedOperationsConfig::default(),
    )
    .map_err(std::io::Error::other)?;

    let baseline = alloc::start();
    let mut latencies = Vec::with_capacity(config.queries);
    for q in 0..config.queries {
        let mut request = match q % 4 {
            0 => SearchRequest::new(
                format!("item_{}", (q * 7919) % config.files),
                SearchMode::IndexedLiteral,
            ),
            1 => SearchRequest::new(
                format!("mod_{}", q % (config.files / 100).max(1)),
                SearchMode::IndexedLiteral,
            ),
            2 => SearchRequest::new("lang_rs", SearchMode::IndexedLiteral),
            _ => {
                let mut r = SearchRequest::new("lang_c", SearchMode::IndexedLiteral);
                r.path = Some(format!("src/mod_{}", q % (config.files / 100).max(1)));
                r
            }
        };
        request.max_results = Some(1000);
        let started = Instant::now();
        let result = rt
            .block_on(ops.search(request))
            .map_err(std::io::Error::other)?;
        latencies.push(ms(started.elapsed()));
        if result.hits.is_empty() {
            return Err(std::io::Error::other(
                "an indexed query of the scale check found nothing",
            ));
        }
    }
    latencies.sort_by(f64::total_cmp);

    // Edits, renames and deletes name files that exist (distinct ones: i * 97 is a bijection
    // modulo a fixture size that is not a multiple of 97).
    let existing = |i: usize| {
        let j = i * 97 % config.files;
        format!("src/mod_{}/file_{j}.rs", j / 100)
    };
    let changes: Vec<Change> = (0..1000)
        .map(|i| match i % 10 {
            4 | 5 => Change::Add {
                path: format!("src/new/file_{i}.rs"),
            },
            6 => Change::Rename {
                old_path: existing(i),
                path: format!("src/moved/file_{i}.rs"),
            },
            7 => Change::Delete { path: existing(i) },
            _ => Change::Edit { path: existing(i) },
        })
        .collect();
    let before = fixture.len();
    let update = UpdateRequest {
        repository_id: "scale".into(),
        worktree_id: "main".into(),
        source_revision: "rev-1".into(),
        changes,
    };
    let started = Instant::now();
    rt.block_on(ops.index().update(update))
        .map_err(std::io::Error::other)?;
    let update_ms = ms(started.elapsed());
    // 600 edits, 200 adds, 100 renames (net zero) and 100 deletes: net +100 files.
    if fixture.len() != before + 100 {
        return Err(std::io::Error::other(format!(
            "the batch update did not apply as routed: {} files before, {} after",
            before,
            fixture.len()
        )));
    }
    let peak_heap_bytes = alloc::peak_over(baseline);

    // Semantic stays bounded: a backend that never answers, and one that floods.
    let never = IndexedRepositoryOperations::new(
        dir.path(),
        Arc::new(MetadataFixture::new(10).semantic().never()),
        bare.clone(),
        IndexedOperationsConfig {
            allowed_modes: vec![SearchMode::Literal, SearchMode::Semantic],
            limits: SearchLimits::new(1000, 4096, SEMANTIC_DEADLINE)
                .map_err(std::io::Error::other)?,
            ..Default::default()
        },
    )
    .map_err(std::io::Error::other)?;
    let started = Instant::now();
    let outcome = rt.block_on(never.search(SearchRequest::new(
        "what parses config",
        SearchMode::Semantic,
    )));
    let semantic_timeout_ms = ms(started.elapsed());
    let semantic_timeout_code_ok = matches!(&outcome, Err(e) if e.code() == ErrorCode::Timeout);
    let flood = IndexedRepositoryOperations::new(
        dir.path(),
        Arc::new(MetadataFixture::new(10).semantic().flood(20_000)),
        bare.clone(),
        IndexedOperationsConfig {
            allowed_modes: vec![SearchMode::Literal, SearchMode::Semantic],
            ..Default::default()
        },
    )
    .map_err(std::io::Error::other)?;
    let flooded = rt
        .block_on(flood.search(SearchRequest::new("anything", SearchMode::Semantic)))
        .map_err(std::io::Error::other)?;

    // Literal baseline: identical bytes, and interleaved timings so drift hits both sides alike.
    let mut literal_identical = true;
    for q in [
        crate::tree::RARE,
        crate::tree::COMMON,
        "fn helper_1_",
        "absent text",
    ] {
        let a = rt.block_on(bare.search(SearchRequest::new(q, SearchMode::Literal)));
        let b = rt.block_on(ops.search(SearchRequest::new(q, SearchMode::Literal)));
        let a = serde_json::to_vec(&a.map_err(|e| e.to_wire())).map_err(std::io::Error::other)?;
        let b = serde_json::to_vec(&b.map_err(|e| e.to_wire())).map_err(std::io::Error::other)?;
        literal_identical &= a == b;
    }
    let (mut bare_t, mut facade_t) = (Vec::new(), Vec::new());
    // Runs 2k and 2k + 1 are one pair: one of each side, back to back.
    let mut pair_ratios = Vec::new();
    for i in 0..config.literal_runs * 2 {
        let req = SearchRequest::new(crate::tree::COMMON, SearchMode::Literal);
        let started = Instant::now();
        // Alternate which side goes first, so neither always runs on a warmer cache.
        let facade_turn = (i % 2 == 0) == (i % 4 < 2);
        if facade_turn {
            rt.block_on(ops.search(req))
                .map_err(std::io::Error::other)?;
            facade_t.push(ms(started.elapsed()));
        } else {
            rt.block_on(bare.search(req))
                .map_err(std::io::Error::other)?;
            bare_t.push(ms(started.elapsed()));
        }
        if i % 2 == 1
            && let (Some(f), Some(b)) = (facade_t.last(), bare_t.last())
        {
            pair_ratios.push(f / b.max(f64::MIN_POSITIVE));
        }
    }

    Ok(ScaleReport {
        files: config.files,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        query_p50_ms: percentile(&latencies, 0.50),
        query_p95_ms: percentile(&latencies, 0.95),
        query_max_ms: latencies.last().copied().unwrap_or(0.0),
        update_ms,
        peak_heap_bytes,
        semantic_timeout_ms,
        semantic_deadline_ms: ms(SEMANTIC_DEADLINE),
        semantic_timeout_code_ok,
        semantic_flood_hits: flooded.hits.len(),
        literal_identical,
        literal_facade_median_ms: median(&mut facade_t),
        literal_bare_median_ms: median(&mut bare_t),
        literal_pair_ratio_median: median(&mut pair_ratios),
    })
}

/// A temporary directory removed on drop (a tiny stand-in so the library needs no tempfile).
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// The path.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> std::io::Result<TempDir> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let p = std::env::temp_dir().join(format!("repo-search-scale-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p)?;
    Ok(TempDir(p))
}
