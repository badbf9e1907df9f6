//! Replays the fuzz targets' committed seed corpora and every regression input (a crash the fuzzer
//! once found) through the same checks the fuzz targets run, so `cargo test` guards them without a
//! fuzzer (the way the regex crate keeps `tests/fuzz`).

#[path = "../../../fuzz/src/lib.rs"]
mod fuzz_checks;

use std::path::Path;

#[test]
fn fuzz_corpora_and_regressions_replay_cleanly() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    type Check = fn(&[u8]);
    let targets: [(&str, Check); 4] = [
        ("trust_validator", fuzz_checks::trust_validator),
        ("path_containment", fuzz_checks::path_containment),
        ("update_validation", fuzz_checks::update_validation),
        ("tool_arguments", fuzz_checks::tool_arguments),
    ];
    let mut replayed = 0;
    for (name, check) in targets {
        for kind in ["corpus", "regressions"] {
            let dir = fuzz.join(kind).join(name);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                if path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                {
                    continue;
                }
                let bytes = std::fs::read(&path).unwrap();
                let outcome = std::panic::catch_unwind(|| check(&bytes));
                assert!(outcome.is_ok(), "{} fails its fuzz check", path.display());
                replayed += 1;
            }
        }
    }
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
