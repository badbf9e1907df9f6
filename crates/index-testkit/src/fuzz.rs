//! Replaying the fuzz targets' committed inputs in `cargo test`, as the regex crate keeps
//! `tests/fuzz`: each target's seed corpus (`fuzz/corpus/<target>`) and every regression input a
//! fuzzer once failed on (`fuzz/regressions/<target>`).

use std::path::Path;

/// Runs every committed input of fuzz target `target` through `check` (the check the target
/// runs), failing on the first input it panics on; returns how many inputs were replayed.
pub fn replay(target: &str, check: fn(&[u8])) -> usize {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut replayed = 0;
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(kind).join(target)) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("lists the fuzz inputs").path();
            if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            {
                continue;
            }
            let bytes = std::fs::read(&path).expect("reads a fuzz input");
            let outcome = std::panic::catch_unwind(|| check(&bytes));
            assert!(outcome.is_ok(), "{} fails its fuzz check", path.display());
            replayed += 1;
        }
    }
    replayed
}
