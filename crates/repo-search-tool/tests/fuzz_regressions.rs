//! Replays the fuzz targets' committed seed corpora and every regression input (a crash the fuzzer
//! once found) through the same checks the fuzz targets run, so `cargo test` guards them without a
//! fuzzer (the way the regex crate keeps `tests/fuzz`).

#[path = "../../../fuzz/src/lib.rs"]
mod fuzz_checks;

#[test]
fn fuzz_corpora_and_regressions_replay_cleanly() {
    type Check = fn(&[u8]);
    let targets: [(&str, Check); 4] = [
        ("trust_validator", fuzz_checks::trust_validator),
        ("path_containment", fuzz_checks::path_containment),
        ("update_validation", fuzz_checks::update_validation),
        ("tool_arguments", fuzz_checks::tool_arguments),
    ];
    let replayed: usize = targets
        .into_iter()
        .map(|(name, check)| index_testkit::fuzz::replay(name, check))
        .sum();
    assert!(
        replayed >= 9,
        "only {replayed} inputs replayed: the corpora are missing"
    );
}

#[test]
fn reference_model_agrees_with_the_guard_on_the_path_tables() {
    for p in [
        "..test",
        "a..b",
        "...",
        "%2e%2e",
        "a b",
        "日本/語",
        "notes:2.txt",
    ] {
        assert!(fuzz_checks::reference_contained(p), "{p}");
        assert!(index_guard::check_path(p).is_ok(), "{p}");
    }
    for p in [
        "",
        "/a",
        "a/",
        "a//b",
        ".",
        "..",
        "a/..",
        "./a",
        "C:x",
        "a\\b",
        "a\0",
        "a\u{FF0F}b",
        "\u{202E}x",
    ] {
        assert!(!fuzz_checks::reference_contained(p), "{p:?}");
        assert!(index_guard::check_path(p).is_err(), "{p:?}");
    }
}
