//! The embedded index on a corpus: `index-bench ROOT STORE [--rg RG] [--build-only]` builds it
//! (with `--build-only` it then prints the files, the build's time and its peak heap, and stops),
//! then times rare,
//! common and selective-regex queries in-process, applies 1000 changed files, and checks the hits
//! of a fixed query list (regexes included) against ripgrep's first match per file. Prints one JSON object; `cargo xtask bench
//! --corpus linux` runs it beside cindex and csearch.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use embedded_index::EmbeddedIndex;
use index_contract::{SearchMode, SearchRequest};
use index_testkit::linux_queries::{COMMON, RARE, REGEX};
use index_testkit::percentile;
use index_testkit::rg::rg_first_lines;
use repo_search_benches::alloc::{self, CountingAllocator};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (root, store) = (Path::new(&args[0]), Path::new(&args[1]));
    let rg = args
        .iter()
        .position(|a| a == "--rg")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let _ = std::fs::remove_dir_all(store);
    let base = alloc::start();
    let t = Instant::now();
    let index = EmbeddedIndex::open(root, store).expect("open");
    let stats = index.build("bench").expect("build");
    let build_ms = ms(t);
    let build_peak = alloc::peak_over(base);
    if args.iter().any(|a| a == "--build-only") {
        println!(
            "{{\"files\":{},\"build_ms\":{build_ms},\"build_peak_heap_mib\":{}}}",
            stats.files,
            build_peak as f64 / 1048576.0
        );
        return;
    }
    drop(index);
    let t = Instant::now();
    let index = EmbeddedIndex::open(root, store).expect("reopen");
    let reopen_ms = ms(t);

    let query_as = |q: &str, cap: usize, regex: bool| {
        let mut r = SearchRequest::new(q, SearchMode::IndexedLiteral);
        r.max_results = Some(cap);
        r.regex = regex;
        let t = Instant::now();
        let resp = index.search_now(&r).expect("search");
        (ms(t), resp)
    };
    let query = |q: &str, cap: usize| query_as(q, cap, false);
    let base = alloc::start();
    let mut rare = Vec::new();
    for _ in 0..10 {
        for q in RARE {
            rare.push(query(q, 1000).0);
        }
    }
    let mut common = Vec::new();
    let mut common_hits = 0;
    for _ in 0..10 {
        for q in COMMON {
            let (t, r) = query(q, 1000);
            common.push(t);
            common_hits = common_hits.max(r.hits.len());
        }
    }
    // The first regex alone (the one the peers run), then all of them.
    let (mut regex, mut regex_all) = (Vec::new(), Vec::new());
    let mut regex_full_scans = 0;
    for _ in 0..20 {
        for (i, q) in REGEX.iter().enumerate() {
            let (t, r) = query_as(q, 1000, true);
            if i == 0 {
                regex.push(t);
            }
            regex_all.push(t);
            regex_full_scans += usize::from(r.full_scan);
        }
    }
    // The first rare query alone, with a type (answered from the index, which holds the hidden
    // files a type selects), with an include glob (answered from the index and the directory
    // cache's record of the ignored files it can select) and with neither, interleaved so that
    // they meet the same machine.
    let (mut untyped, mut typed, mut globbed) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..21 {
        for (times, edit) in [
            (&mut untyped, (|_| {}) as fn(&mut SearchRequest)),
            (&mut typed, |r| r.files.types = vec!["c".into()]),
            (&mut globbed, |r| r.files.globs = vec!["*.c".into()]),
        ] {
            let mut r = SearchRequest::new(RARE[0], SearchMode::IndexedLiteral);
            edit(&mut r);
            let t = Instant::now();
            index.search_now(&r).expect("filtered search");
            times.push(ms(t));
        }
    }
    let query_peak = alloc::peak_over(base);

    // 1000 changed files, another 1000 each round: rewrite them in place (same content), then
    // apply. Five rounds, so that one slow commit (the machine's, not ours) is not the figure.
    let c_files: Vec<String> = index
        .indexed_paths()
        .into_iter()
        .filter(|p| p.ends_with(".c"))
        .collect();
    let mut applies = Vec::new();
    for (round, chunk) in c_files.chunks(1000).take(5).enumerate() {
        let mut changed = chunk.to_vec();
        changed.sort();
        for p in &changed {
            let full = root.join(p);
            let bytes = std::fs::read(&full).expect("read");
            std::fs::write(&full, bytes).expect("rewrite");
        }
        let t = Instant::now();
        index
            .apply(&changed, &[], Some(&format!("bench-{}", round + 2)))
            .expect("apply");
        applies.push(ms(t));
    }
    let apply_ms = percentile(applies, 0.5);

    let mut agree = serde_json::Map::new();
    if let Some(rg) = &rg {
        let fixed = RARE.iter().chain(&[
            "EXPORT_SYMBOL_GPL(kvm",
            "MODULE_LICENSE(\"GPL v2\")",
            "spin_lock_irqsave(&",
        ]);
        for (q, is_regex) in fixed
            .map(|q| (q, false))
            .chain(REGEX.iter().map(|q| (q, true)))
        {
            let cap = index_contract::limits::HARD_MAX_RESULTS;
            let (_, resp) = query_as(q, cap, is_regex);
            let ours: BTreeMap<String, u64> =
                resp.hits.iter().map(|h| (h.path.clone(), h.line)).collect();
            let theirs = rg_first_lines(Path::new(rg), root, q, is_regex);
            // Past the hard cap, the answer must be a full page of rg's files, marked incomplete.
            let capped = theirs.len() > cap;
            let identical = if capped {
                ours.len() == cap
                    && !resp.complete
                    && ours.iter().all(|(p, line)| theirs.get(p) == Some(line))
            } else {
                ours == theirs
            };
            agree.insert(
                (*q).to_owned(),
                serde_json::json!({"files": theirs.len(), "capped": capped, "identical": identical}),
            );
        }
    }
    let corpus_bytes: u64 = index
        .indexed_paths()
        .iter()
        .filter_map(|p| std::fs::metadata(root.join(p)).ok())
        .map(|m| m.len())
        .sum();
    println!(
        "{}",
        serde_json::json!({
            "files": stats.files,
            "segments": stats.segments,
            "build_ms": build_ms,
            "build_peak_heap_mib": build_peak as f64 / 1048576.0,
            "index_bytes": stats.index_bytes,
            "corpus_bytes": corpus_bytes,
            "reopen_ms": reopen_ms,
            "rare_p50_ms": percentile(rare.clone(), 0.5),
            "rare_p95_ms": percentile(rare, 0.95),
            "common_p50_ms": percentile(common.clone(), 0.5),
            "common_p95_ms": percentile(common, 0.95),
            "common_hits": common_hits,
            "regex_p50_ms": percentile(regex.clone(), 0.5),
            "regex_p95_ms": percentile(regex, 0.95),
            "regex_all_p95_ms": percentile(regex_all, 0.95),
            "regex_full_scans": regex_full_scans,
            "untyped_rare_p50_ms": percentile(untyped, 0.5),
            "typed_rare_p50_ms": percentile(typed, 0.5),
            "globbed_rare_p50_ms": percentile(globbed, 0.5),
            "query_peak_heap_mib": query_peak as f64 / 1048576.0,
            "apply_1000_ms": apply_ms,
            "agreement_with_rg": agree,
        })
    );
}
