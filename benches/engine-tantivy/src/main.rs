//! `engine-tantivy ROOT DIR`: indexes the embedded index's file selection of ROOT with tantivy
//! (3-gram tokens, lower-cased, doc ids only: the same information our segments hold), then times
//! candidate queries (every trigram of the query must occur). Prints build time, index size and
//! query medians, for the engine decision in `docs/embedded-index.md`.

use std::path::Path;
use std::time::Instant;

use tantivy::collector::DocSetCollector;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{LowerCaser, NgramTokenizer, TextAnalyzer};
use tantivy::{Index, TantivyDocument, Term};

fn dir_size(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (root, dir) = (Path::new(&args[0]), Path::new(&args[1]));
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let store = dir.join("selection-probe");
    let paths = embedded_index::EmbeddedIndex::open(root, &store)?.selection();

    let mut sb = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("tri")
        .set_index_option(IndexRecordOption::Basic);
    let body = sb.add_text_field("body", TextOptions::default().set_indexing_options(indexing));
    let schema = sb.build();
    let index_dir = dir.join("tantivy");
    std::fs::create_dir_all(&index_dir)?;
    let index = Index::create_in_dir(&index_dir, schema)?;
    index.tokenizers().register(
        "tri",
        TextAnalyzer::builder(NgramTokenizer::new(3, 3, false)?).filter(LowerCaser).build(),
    );

    let started = Instant::now();
    let mut writer = index.writer_with_num_threads(2, 400_000_000)?;
    for p in &paths {
        let bytes = std::fs::read(root.join(p)).unwrap_or_default();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        let text = String::from_utf8_lossy(&bytes[..end]);
        let mut doc = TantivyDocument::default();
        doc.add_text(body, &text);
        writer.add_document(doc)?;
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    let build_ms = started.elapsed().as_secs_f64() * 1000.0;
    let size = dir_size(&index_dir);

    let reader = index.reader()?;
    let searcher = reader.searcher();
    let mut results = Vec::new();
    for q in ["SYSCALL_DEFINE3(fchmodat", "EXPORT_SYMBOL_GPL("] {
        let lower = q.to_lowercase();
        let chars: Vec<char> = lower.chars().collect();
        let clauses: Vec<(Occur, Box<dyn Query>)> = chars
            .windows(3)
            .map(|w| {
                let t = Term::from_field_text(body, &w.iter().collect::<String>());
                (Occur::Must, Box::new(TermQuery::new(t, IndexRecordOption::Basic)) as Box<dyn Query>)
            })
            .collect();
        let query = BooleanQuery::new(clauses);
        let mut times = Vec::new();
        let mut candidates = 0;
        for _ in 0..11 {
            let t = Instant::now();
            candidates = searcher.search(&query, &DocSetCollector)?.len();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        results.push(format!("\"{q}\": {{\"candidates\": {candidates}, \"median_ms\": {:.3}}}", times[5]));
    }
    println!(
        "{{\"engine\": \"tantivy 0.27\", \"files\": {}, \"build_ms\": {build_ms:.0}, \"index_bytes\": {size}, \"queries\": {{{}}}}}",
        paths.len(),
        results.join(", ")
    );
    Ok(())
}
