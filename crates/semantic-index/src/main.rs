//! `semantic-index`: builds the static model and runs the evaluation (`cargo xtask model static`
//! and `cargo xtask eval semantic` call it).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use semantic_index::rank::Weights;
use semantic_index::{
    BUILTIN_FILE, BUILTIN_SHA256, ChunkHash, Document, HASH_BYTES, MiniLm, STATIC_FILE, Scorer,
    SemanticIndex, StaticModel, TUNED_FILE, TuneSettings, VectorLog,
};

/// The most vectors the evaluation keeps (each corpus has about 11 000 chunks).
const KEPT_VECTORS: usize = 100_000;

/// A chunk hash as the kept-vector file names it: its first [`HASH_BYTES`] bytes, as the store.
fn short_hash(hash: &[u8; 32]) -> ChunkHash {
    let mut short = [0u8; HASH_BYTES];
    short.copy_from_slice(&hash[..HASH_BYTES]);
    short
}

const HELP: &str = "\
semantic-index <command> --model-dir DIR

commands:
  static                 build the static model from MiniLM into DIR (deterministic)
  builtin --into DIR2    quantize DIR's static model to int8 and write it, with the tokenizer, into
                         DIR2 as the built-in model (`cargo xtask model static` writes
                         crates/semantic-index/model so); says whether its sha256 is the pinned one
  tune --pairs FILE [--epochs N] [--batch N] [--lr X] [--scale X] [--out NAME]
                         fine-tune the static model on (query, code) pairs (FILE from
                         `cargo xtask model static --tune`) into DIR/NAME (default the tuned file)
  embed TEXT...          print MiniLM's vectors of the texts (first 8 values and the norm)
  eval --data FILE [--static NAME] [--rerank-queries N] [--rerank-depth N] [--rerank-tokens N]
       [--tune] [--dev] [--no-idf] [--minilm-cache FILE]
                         the docstring-to-function evaluation (FILE from `cargo xtask eval semantic`);
                         --static names the static model in DIR (default the tuned one when
                         built; `builtin` for the built-in one), --tune sweeps the weights on the dev queries, --dev reports the
                         dev queries instead of the test queries, --no-idf drops the index's IDF
                         weighting of static vectors, --minilm-cache embeds every chunk with MiniLM
                         once and keeps the vectors in FILE for later runs (the re-rank's ms/query
                         then leaves MiniLM's chunk work out), --rerank-tokens sets how many
                         word pieces of a chunk MiniLM reads when it re-ranks (default 64)
";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("semantic-index: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let mut model_dir = None;
    let mut data = None;
    let mut rerank_queries = usize::MAX;
    let mut tune = false;
    let mut no_idf = false;
    let mut rerank_depth = None;
    let mut rerank_tokens = None;
    let mut static_file: Option<String> = None;
    let mut dev = false;
    let mut minilm_cache = None;
    let mut pairs = None;
    let mut settings = TuneSettings::default();
    let mut out = TUNED_FILE.to_owned();
    let mut rest = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--model-dir" => model_dir = it.next().map(PathBuf::from),
            "--data" => data = it.next().map(PathBuf::from),
            "--rerank-queries" => {
                rerank_queries = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or("--rerank-queries N")?
            }
            "--tune" => tune = true,
            "--dev" => dev = true,
            "--minilm-cache" => minilm_cache = it.next().map(PathBuf::from),
            "--static" => static_file = Some(it.next().ok_or("--static NAME")?),
            "--pairs" => pairs = it.next().map(PathBuf::from),
            "--out" => out = it.next().ok_or("--out NAME")?,
            "--epochs" => settings.epochs = number(it.next(), "--epochs N")?,
            "--batch" => settings.batch = number(it.next(), "--batch N")?,
            "--lr" => settings.learning_rate = number(it.next(), "--lr X")?,
            "--scale" => settings.scale = number(it.next(), "--scale X")?,
            "--no-idf" => no_idf = true,
            "--rerank-tokens" => rerank_tokens = Some(number(it.next(), "--rerank-tokens N")?),
            "--rerank-depth" => {
                rerank_depth = Some(
                    it.next()
                        .and_then(|n| n.parse().ok())
                        .ok_or("--rerank-depth N")?,
                )
            }
            _ => rest.push(a),
        }
    }
    let dir = model_dir.ok_or(format!("--model-dir is required\n\n{HELP}"))?;
    let load = || {
        let t = Instant::now();
        let m = MiniLm::load(&dir).map_err(|e| e.to_string());
        eprintln!("MiniLM loaded in {:.2} s", t.elapsed().as_secs_f64());
        m
    };
    match rest.first().map(String::as_str) {
        Some("static") => {
            let minilm = load()?;
            let t = Instant::now();
            let model = StaticModel::build(&minilm, &dir).map_err(|e| e.to_string())?;
            let built = t.elapsed().as_secs_f64();
            let sha = model.save(&dir).map_err(|e| e.to_string())?;
            println!("static model built in {built:.1} s, sha256 {sha}");
            Ok(())
        }
        Some("builtin") => {
            let out = match rest.get(1..) {
                Some([flag, out]) if flag == "--into" => PathBuf::from(out),
                _ => return Err(format!("builtin needs --into DIR\n\n{HELP}")),
            };
            let model = StaticModel::load(&dir)
                .map_err(|e| format!("{e} (run `cargo xtask model static`)"))?;
            std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let sha = model.write_builtin(&dir, &out).map_err(|e| e.to_string())?;
            if sha == BUILTIN_SHA256 {
                println!("built-in model {BUILTIN_FILE} rebuilt bit for bit, sha256 {sha}");
                Ok(())
            } else {
                Err(format!(
                    "built-in model {BUILTIN_FILE} written with sha256 {sha}, not the pinned \
                     {BUILTIN_SHA256}: if the model was meant to change, pin the new sha256 as \
                     semantic_index::BUILTIN_SHA256"
                ))
            }
        }
        Some("tune") => {
            let base = StaticModel::load(&dir)
                .map_err(|e| format!("{e} (run `cargo xtask model static`)"))?;
            let pairs = read_pairs(&pairs.ok_or("--pairs FILE")?)?;
            eprintln!("tuning on {} pairs with {settings:?}", pairs.len());
            let t = Instant::now();
            let tuned = base.tune(&pairs, settings, |epoch, loss| {
                eprintln!(
                    "epoch {epoch}: mean loss {loss:.4} ({:.0} s)",
                    t.elapsed().as_secs_f64()
                )
            });
            let sha = tuned.save_as(&dir, &out).map_err(|e| e.to_string())?;
            println!(
                "tuned static model {out} written in {:.1} s, sha256 {sha}",
                t.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Some("embed") => {
            let minilm = load()?;
            let texts: Vec<&str> = rest[1..].iter().map(String::as_str).collect();
            for (text, v) in texts
                .iter()
                .zip(minilm.embed(&texts).map_err(|e| e.to_string())?)
            {
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                println!("{text:?}: {:?} norm {norm:.6}", &v[..8.min(v.len())]);
            }
            Ok(())
        }
        Some("eval") => eval(
            load()?,
            &dir,
            &data.ok_or("--data FILE")?,
            EvalOptions {
                static_file: static_file.as_deref(),
                rerank_queries,
                tune,
                dev,
                minilm_cache: minilm_cache.as_deref(),
                weights: Weights {
                    idf_dense: !no_idf,
                    rerank_depth: rerank_depth.unwrap_or(Weights::default().rerank_depth),
                    rerank_tokens: rerank_tokens.unwrap_or(Weights::default().rerank_tokens),
                    ..Weights::default()
                },
            },
        ),
        _ => Err(HELP.into()),
    }
}

fn number<T: std::str::FromStr>(arg: Option<String>, usage: &str) -> Result<T, String> {
    arg.and_then(|n| n.parse().ok())
        .ok_or_else(|| usage.to_owned())
}

/// The `[{"query": …, "path": …, "code": …}, …]` file `cargo xtask model static --tune` mines;
/// the code side is the code as the index searches it, under its path
/// ([`semantic_index::searched_text`]).
fn read_pairs(path: &std::path::Path) -> Result<Vec<(String, String)>, String> {
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?,
    )
    .map_err(|e| e.to_string())?;
    Ok(json
        .as_array()
        .ok_or("the pairs file is not a list")?
        .iter()
        .filter_map(|p| {
            let code = p["code"].as_str()?;
            Some((
                p["query"].as_str()?.to_owned(),
                match p["path"].as_str() {
                    Some(path) => semantic_index::searched_text(path, code),
                    None => code.to_owned(),
                },
            ))
        })
        .collect())
}

struct Query {
    doc: usize,
    query: String,
    hard: String,
}

/// How `eval` runs: its command-line options.
struct EvalOptions<'a> {
    static_file: Option<&'a str>,
    rerank_queries: usize,
    tune: bool,
    dev: bool,
    /// Where MiniLM's chunk vectors are kept between runs.
    minilm_cache: Option<&'a std::path::Path>,
    weights: Weights,
}

fn eval(
    minilm: MiniLm,
    dir: &std::path::Path,
    data: &std::path::Path,
    options: EvalOptions<'_>,
) -> Result<(), String> {
    let EvalOptions {
        static_file,
        rerank_queries,
        tune,
        dev: dev_report,
        minilm_cache,
        weights,
    } = options;
    // The tuned model when it has been built, unless a file is named.
    let file = static_file.unwrap_or(if dir.join(TUNED_FILE).is_file() {
        TUNED_FILE
    } else {
        STATIC_FILE
    });
    let statics = if file == "builtin" {
        StaticModel::builtin()
    } else {
        StaticModel::load_file(dir, file)
    }
    .map_err(|e| format!("{e} (run `cargo xtask model static`)"))?;
    println!("static model: {file}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let docs: Vec<Document> = json["docs"]
        .as_array()
        .ok_or("no docs")?
        .iter()
        .map(|d| Document {
            key: format!(
                "{}::{}",
                d["path"].as_str().unwrap_or(""),
                d["name"].as_str().unwrap_or("")
            ),
            path: d["path"].as_str().unwrap_or("").to_owned(),
            text: d["code"].as_str().unwrap_or("").to_owned(),
        })
        .collect();
    let queries = |name: &str| -> Vec<Query> {
        json[name]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|q| Query {
                        doc: q["doc"].as_u64().unwrap_or(0) as usize,
                        query: q["query"].as_str().unwrap_or("").to_owned(),
                        hard: q["hard"].as_str().unwrap_or("").to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (mut test, dev) = (queries("test"), queries("dev"));
    let reported = if dev_report { "dev" } else { "test" };
    if dev_report {
        test = queries("dev");
    }
    let t = Instant::now();
    let mut index = SemanticIndex::build_with(&statics, docs, weights);
    if let Some(path) = minilm_cache {
        // The host's kept-vector file, under the host's key: the chunk hash's first
        // HASH_BYTES bytes name a vector there, the whole hash here.
        let log = VectorLog::new(
            path,
            semantic_index::rank::rerank_key(&minilm, &index.weights),
            minilm.dim(),
            KEPT_VECTORS,
        );
        let full: HashMap<ChunkHash, [u8; 32]> = index
            .chunks()
            .iter()
            .map(|c| (short_hash(&c.hash), c.hash))
            .collect();
        let kept = log.read();
        index.extend_minilm_cache(
            kept.into_iter()
                .filter_map(|(h, v)| Some((*full.get(&h)?, v))),
        );
        let known = index.cached_vectors();
        eprintln!("{known} MiniLM chunk vectors read from {}", path.display());
        // Every chunk's vector is computed up front, in large batches, and kept, so that no
        // later run of the same corpus and model embeds a chunk again.
        let cached: std::collections::HashSet<[u8; 32]> =
            index.minilm_cache().into_iter().map(|(h, _)| h).collect();
        let mut missing: Vec<([u8; 32], String)> = (0..index.chunks().len())
            .map(|c| index.rerank_input(c))
            .filter(|(hash, _)| !cached.contains(hash))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let t = Instant::now();
        for batch in missing.chunks(512) {
            let refs: Vec<&str> = batch.iter().map(|(_, t)| t.as_str()).collect();
            let vectors = minilm
                .embed_limited(&refs, index.weights.rerank_tokens)
                .map_err(|e| e.to_string())?;
            let computed: Vec<([u8; 32], Vec<f32>)> = batch
                .iter()
                .map(|(h, _)| *h)
                .zip(vectors.iter().map(|v| semantic_index::kept(v)))
                .collect();
            let short: Vec<(ChunkHash, Vec<f32>)> = computed
                .iter()
                .map(|(h, v)| (short_hash(h), v.clone()))
                .collect();
            log.append(&short)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            index.extend_minilm_cache(computed);
        }
        eprintln!(
            "{} chunks embedded by MiniLM in {:.1} s",
            missing.len(),
            t.elapsed().as_secs_f64()
        );
    }
    println!(
        "corpus: {} functions, {} chunks, indexed in {:.2} s; {} {reported} queries, {} dev queries",
        index.documents().len(),
        index.chunks().len(),
        t.elapsed().as_secs_f64(),
        test.len(),
        dev.len()
    );
    if tune {
        // A coarse grid on the dev queries only; the test queries never choose a weight.
        let mut best = (0.0, Weights::default());
        for (name, scorer) in [("BM25", Scorer::Bm25), ("dense", Scorer::Dense)] {
            let (m, _) = measure(&index, &dev, scorer, None, false, usize::MAX);
            let (h, _) = measure(&index, &dev, scorer, None, true, usize::MAX);
            println!("dev {name} alone: MRR {m:.3} hard {h:.3}");
        }
        // Dividing by the best cosine always won (docs/semantic-design.md), and the file-name boost
        // cannot be measured here: the grid is over the BM25/dense balance and the definition
        // boost.
        for bm25 in [0.2, 0.275, 0.35, 0.5] {
            for definition in [0.1, 0.2, 0.3] {
                index.weights = Weights {
                    bm25,
                    dense: 1.0 - bm25,
                    definition,
                    ..Weights::default()
                };
                let (m, _) = measure(&index, &dev, Scorer::Hybrid, None, false, usize::MAX);
                let (h, _) = measure(&index, &dev, Scorer::Hybrid, None, true, usize::MAX);
                let r30 = measure_at(&index, &dev, true, 30);
                println!(
                    "dev hybrid bm25 {bm25} definition {definition}: MRR {m:.3} hard {h:.3} hard R@30 {r30:.3}"
                );
                if m + h > best.0 {
                    best = (m + h, index.weights);
                }
            }
        }
        index.weights = best.1;
        println!("best on dev: {:?}", best.1);
        if rerank_queries == 0 {
            return Ok(());
        }
        // The first variant fills the chunk-vector cache; the others reuse it.
        for (rerank, rerank_minmax, rerank_depth) in [
            (0.7, false, 30),
            (0.5, false, 30),
            (0.9, false, 30),
            (0.5, true, 30),
            (0.7, true, 30),
            (0.9, true, 30),
            (0.7, false, 50),
            (0.7, true, 50),
        ] {
            index.weights = Weights {
                rerank,
                rerank_minmax,
                rerank_depth,
                ..index.weights
            };
            let (m, _) = measure(
                &index,
                &dev,
                Scorer::Rerank,
                Some(&minilm),
                false,
                usize::MAX,
            );
            let (h, _) = measure(
                &index,
                &dev,
                Scorer::Rerank,
                Some(&minilm),
                true,
                usize::MAX,
            );
            println!(
                "dev rerank {rerank} minmax {rerank_minmax} depth {rerank_depth}: MRR {m:.3} hard {h:.3}"
            );
        }
        return Ok(());
    }
    println!("\n{reported} queries:\n");
    println!("| ranking | queries | MRR@10 | R@10 | hard MRR@10 | hard R@10 | ms/query |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (name, scorer, limit) in [
        ("BM25 alone", Scorer::Bm25, usize::MAX),
        ("static dense alone", Scorer::Dense, usize::MAX),
        ("hybrid", Scorer::Hybrid, usize::MAX),
        ("hybrid (re-rank subset)", Scorer::Hybrid, rerank_queries),
        ("hybrid + MiniLM re-rank", Scorer::Rerank, rerank_queries),
    ] {
        // The hybrid row on the re-ranked subset is only worth a line when it is a subset.
        if (name == "hybrid (re-rank subset)" && limit >= test.len()) || limit == 0 {
            continue;
        }
        let t = Instant::now();
        let (mrr, recall) = measure(&index, &test, scorer, Some(&minilm), false, limit);
        let (hmrr, hrecall) = measure(&index, &test, scorer, Some(&minilm), true, limit);
        let n = test.len().min(limit);
        println!(
            "| {name} | {n} | {mrr:.3} | {recall:.3} | {hmrr:.3} | {hrecall:.3} | {:.1} |",
            t.elapsed().as_secs_f64() * 1000.0 / (2 * n) as f64
        );
    }
    Ok(())
}

/// The hybrid ranking's recall at `depth`: how often the answer is among the candidates a
/// re-rank of that depth would see.
fn measure_at(index: &SemanticIndex<'_>, queries: &[Query], hard: bool, depth: usize) -> f64 {
    let found = queries
        .iter()
        .filter(|q| {
            let text = if hard { &q.hard } else { &q.query };
            index
                .search(text, Scorer::Hybrid, None, depth)
                .iter()
                .any(|h| h.doc == q.doc)
        })
        .count();
    found as f64 / queries.len().max(1) as f64
}

/// MRR@10 and R@10 of the first `limit` queries.
fn measure(
    index: &SemanticIndex<'_>,
    queries: &[Query],
    scorer: Scorer,
    minilm: Option<&MiniLm>,
    hard: bool,
    limit: usize,
) -> (f64, f64) {
    let queries = &queries[..queries.len().min(limit)];
    let (mut rr, mut found) = (0.0, 0.0);
    for q in queries {
        let text = if hard { &q.hard } else { &q.query };
        let hits = index.search(text, scorer, minilm, 10);
        if let Some(rank) = hits.iter().position(|h| h.doc == q.doc) {
            rr += 1.0 / (rank + 1) as f64;
            found += 1.0;
        }
    }
    let n = queries.len().max(1) as f64;
    (rr / n, found / n)
}
