//! `cargo xtask fuzz [--seconds N] [--target T]`: runs the cargo-fuzz targets in `fuzz/`.
//!
//! The machine has only the stable toolchain; cargo-fuzz's nightly flags are enabled with
//! `RUSTC_BOOTSTRAP=1`. Targets are safe Rust, so they run without a sanitizer (`-s none`), which
//! is several times faster. New inputs go to `target/fuzz-corpus/<target>` (seeded from the
//! committed `fuzz/corpus/<target>`); a crash is copied into `fuzz/regressions/<target>/`, where
//! `cargo test` replays it (`model_headers` in `crates/semantic-index/tests/fuzz_model_headers.rs`,
//! the others in `crates/repo-search-tool/tests/fuzz_regressions.rs`), and the command fails.

use std::process::Command;
use std::time::Instant;

use crate::{cargo, root, run};

pub(crate) const TARGETS: [&str; 5] = [
    "trust_validator",
    "path_containment",
    "update_validation",
    "tool_arguments",
    "model_headers",
];
const CARGO_FUZZ_VERSION: &str = "0.13.2";

fn install() -> Result<(), String> {
    let tools = root().join("target/tools");
    let bin = tools.join("bin/cargo-fuzz");
    let ok = Command::new(&bin).arg("--version").output().is_ok_and(|o| {
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains(CARGO_FUZZ_VERSION)
    });
    if !ok {
        run(cargo()
            .args([
                "install",
                "cargo-fuzz",
                "--locked",
                "--version",
                CARGO_FUZZ_VERSION,
                "--root",
            ])
            .arg(&tools))?;
    }
    Ok(())
}

pub(crate) fn fuzz(args: &[String]) -> Result<(), String> {
    let seconds: u64 = match args.iter().position(|a| a == "--seconds") {
        Some(i) => args
            .get(i + 1)
            .and_then(|s| s.parse().ok())
            .ok_or("--seconds takes a whole number")?,
        None => 60,
    };
    let only = args
        .iter()
        .position(|a| a == "--target")
        .and_then(|i| args.get(i + 1))
        .cloned();
    if let Some(t) = &only
        && !TARGETS.contains(&t.as_str())
    {
        return Err(format!(
            "unknown target `{t}`; targets: {}",
            TARGETS.join(", ")
        ));
    }
    install()?;
    let path = format!(
        "{}:{}",
        root().join("target/tools/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let fuzz_dir = root().join("fuzz");
    let mut report = Vec::new();
    for target in TARGETS
        .iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == **t))
    {
        let scratch = root().join("target/fuzz-corpus").join(target);
        std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
        let log = root()
            .join("target/fuzz-corpus")
            .join(format!("{target}.log"));
        let started = Instant::now();
        let status = Command::new("cargo")
            .current_dir(&fuzz_dir)
            .env("PATH", &path)
            .env("RUSTC_BOOTSTRAP", "1")
            .args(["fuzz", "run", "--sanitizer", "none", "--release", target])
            .arg(&scratch)
            .arg(fuzz_dir.join("corpus").join(target))
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .status()
            .map_err(|e| format!("could not run cargo fuzz: {e}"))?;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        // libFuzzer closes with "Done N runs in S second(s)".
        let execs = text
            .lines()
            .rev()
            .find_map(|l| {
                l.strip_prefix("Done ")
                    .and_then(|r| r.split_whitespace().next())
            })
            .unwrap_or("?")
            .to_owned();
        if !status.success() {
            let artifacts = fuzz_dir.join("artifacts").join(target);
            let dest = fuzz_dir.join("regressions").join(target);
            std::fs::create_dir_all(&dest).map_err(|e| e.to_string())?;
            if let Ok(rd) = std::fs::read_dir(&artifacts) {
                for e in rd.flatten() {
                    let _ = std::fs::copy(e.path(), dest.join(e.file_name()));
                }
            }
            return Err(format!(
                "fuzz target {target} failed (log: {}); its crash inputs were copied to fuzz/regressions/{target}/",
                log.display()
            ));
        }
        report.push((target.to_string(), execs, started.elapsed().as_secs()));
    }
    println!("{:<20} {:>14} {:>8}", "target", "executions", "seconds");
    for (t, e, s) in report {
        println!("{t:<20} {e:>14} {s:>8}");
    }
    Ok(())
}
