//! The grep options end to end: the facade in front of the embedded index accepts what the index
//! declares, refuses what it does not, and its pages concatenate.

use std::sync::Arc;

use embedded_index::EmbeddedIndex;
use index_contract::{
    RepositoryOperations, SearchHit, SearchMode, SearchRequest, limits::SearchLimits,
};
use index_testkit::tree;
use literal_search::LiteralSearch;
use repo_search_tool::{IndexedOperationsConfig, IndexedRepositoryOperations};

fn facade(root: &std::path::Path, store: &std::path::Path) -> IndexedRepositoryOperations {
    let index = EmbeddedIndex::open(root, store).unwrap();
    index.build("r1").unwrap();
    IndexedRepositoryOperations::new(
        root,
        Arc::new(index),
        Arc::new(LiteralSearch::new(root).unwrap()),
        IndexedOperationsConfig {
            limits: SearchLimits::new(10_000, 4096, std::time::Duration::from_secs(60)).unwrap(),
            ..IndexedOperationsConfig::default()
        },
    )
    .unwrap()
}

fn regex(query: &str, max_results: usize) -> SearchRequest {
    let mut r = SearchRequest::new(query, SearchMode::IndexedLiteral);
    r.regex = true;
    r.max_results = Some(max_results);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regex_pages_through_the_facade_concatenate_to_the_whole_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = tree::Rng::new(11);
    for i in 0..1500 {
        let d: &&str = rng.pick(&["src", "tests", "docs/x", "lib/a/b"]);
        let body = if rng.below(4) == 0 {
            "nothing\n".to_owned()
        } else {
            format!("fn  new_item{i}() {{}}\nlet x = new_thing();\n")
        };
        tree::write(dir.path(), &format!("{d}/f{i}.rs"), body.as_bytes());
    }
    let store = tempfile::tempdir().unwrap();
    let ops = facade(dir.path(), store.path());
    let query = r"fn\s+new_[a-z]+[0-9]*\(";
    let all = ops.search(regex(query, 10_000)).await.unwrap();
    assert!(all.complete && all.next_offset.is_none());
    assert!(all.hits.len() > 1000, "only {} hits", all.hits.len());
    let mut joined: Vec<SearchHit> = Vec::new();
    let mut request = regex(query, 400);
    loop {
        let page = ops.search(request.clone()).await.unwrap();
        joined.extend(page.hits);
        match page.next_offset {
            Some(next) => {
                request.offset = next as usize;
                request.page_token = page.page_token;
            }
            None => break,
        }
    }
    assert_eq!(joined, all.hits);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_options_are_served_hidden_files_too() {
    let (tree, _outside) = tree::generated_tree(9);
    tree::write(tree.path(), ".hidden/secret.rs", b"fn main() {}\n");
    let store = tempfile::tempdir().unwrap();
    let ops = facade(tree.path(), store.path());
    let scan = ops.search(regex(r"\w+", 100)).await.unwrap();
    assert_eq!(scan.stats.full_scan, Some(true));
    let mut counted = regex(r"fn\s+main", 100);
    counted.output = index_contract::OutputMode::Count;
    counted.files.types = vec!["rust".into()];
    counted.context = Default::default();
    let found = ops.search(counted).await.unwrap();
    assert!(!found.hits.is_empty());
    assert!(
        found
            .hits
            .iter()
            .all(|h| h.count.is_some() && h.path.ends_with(".rs"))
    );
    // A file only `--hidden` selects is served from the index mode, as `rg --hidden` finds it.
    let mut hidden = regex("main", 1000);
    hidden.files.include_hidden = true;
    let found = ops.search(hidden).await.unwrap();
    assert!(found.hits.iter().any(|h| h.path == ".hidden/secret.rs"));
    let plain = ops.search(regex("main", 1000)).await.unwrap();
    assert!(!plain.hits.iter().any(|h| h.path.starts_with(".hidden/")));
}
