//! Replays the `model_headers` fuzz target's committed seed corpus and every regression input (a
//! crash the fuzzer once found) through the check the target runs, so `cargo test` guards the
//! model headers without a fuzzer, as `repo-search-tool/tests/fuzz_regressions.rs` does for the
//! other four targets.

#[path = "../../../fuzz/src/model_headers.rs"]
mod model_headers;

#[test]
fn model_header_fuzz_corpus_and_regressions_replay_cleanly() {
    let replayed = index_testkit::fuzz::replay("model_headers", model_headers::model_headers);
    assert!(
        replayed >= 8,
        "only {replayed} inputs replayed: the corpus is missing"
    );
}
