//! `cargo xtask chaos [--minutes N] [--test FILE]... [--release]`: runs the chaos suite
//! (`repo-search-cli`'s `tests/chaos.rs` and `tests/chaos_mcp.rs`) again and again for N minutes,
//! stopping at the first failure.
//!
//! The suite is built once first, so compiling never counts as a run and a build error is not
//! reported as chaos. Each run gets the next seed in `REPO_SEARCH_CHAOS_SEED` (1, 2, …) so that a
//! failure names the run to replay; tests may ignore it. A run's output goes to
//! `target/chaos/last.log` and is printed only when the run fails.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::{cargo, describe, root, run};

/// The test files of the chaos suite, in `crates/repo-search-cli/tests/`.
const SUITE: [&str; 2] = ["chaos", "chaos_mcp"];

/// The environment variable carrying each run's seed.
const SEED_VAR: &str = "REPO_SEARCH_CHAOS_SEED";

#[derive(Debug, PartialEq, Eq)]
struct Options {
    minutes: u64,
    tests: Vec<String>,
    release: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        minutes: 10,
        tests: Vec::new(),
        release: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--minutes" => {
                options.minutes = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|&m| m > 0)
                    .ok_or("--minutes takes a whole number above zero")?;
            }
            "--test" => {
                let test = args.next().ok_or("--test takes a test file name")?;
                if !SUITE.contains(&test.as_str()) {
                    return Err(format!(
                        "`{test}` is not a chaos test file; they are: {}",
                        SUITE.join(", ")
                    ));
                }
                options.tests.push(test.clone());
            }
            "--release" => options.release = true,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if options.tests.is_empty() {
        options.tests = SUITE.iter().map(|t| t.to_string()).collect();
    }
    Ok(options)
}

/// `cargo test -p repo-search-cli --test …` for the chosen files.
fn test_command(options: &Options) -> Command {
    let mut cmd = cargo();
    cmd.current_dir(root())
        .args(["test", "-p", "repo-search-cli"]);
    for test in &options.tests {
        cmd.args(["--test", test]);
    }
    if options.release {
        cmd.arg("--release");
    }
    cmd
}

pub(crate) fn chaos(args: &[String]) -> Result<(), String> {
    let options = parse(args)?;
    run(test_command(&options).arg("--no-run"))?;
    let log_dir = root().join("target/chaos");
    std::fs::create_dir_all(&log_dir).map_err(|e| e.to_string())?;
    let log = log_dir.join("last.log");
    let budget = Duration::from_secs(options.minutes * 60);
    let started = Instant::now();
    let mut runs = 0u64;
    let mut failure = None;
    while failure.is_none() && (runs == 0 || started.elapsed() < budget) {
        runs += 1;
        let mut cmd = test_command(&options);
        cmd.env(SEED_VAR, runs.to_string());
        let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let run_started = Instant::now();
        let status = cmd
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file)
            .status()
            .map_err(|e| format!("could not start `{}`: {e}", describe(&cmd)))?;
        eprintln!(
            "chaos run {runs} ({SEED_VAR}={runs}): {} in {:.1?}",
            if status.success() { "ok" } else { "FAILED" },
            run_started.elapsed()
        );
        if !status.success() {
            eprint!("{}", std::fs::read_to_string(&log).unwrap_or_default());
            failure = Some(format!(
                "run {runs} failed ({status}); replay with {SEED_VAR}={runs} `{}` (log: {})",
                describe(&cmd),
                log.display()
            ));
        }
    }
    println!(
        "chaos: {runs} runs, {} failures, wall time {:.1?}",
        u8::from(failure.is_some()),
        started.elapsed()
    );
    failure.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str], expected: Result<(u64, &[&str], bool), &str>) {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let expected = expected.map(|(minutes, tests, release)| Options {
            minutes,
            tests: tests.iter().map(|t| t.to_string()).collect(),
            release,
        });
        assert_eq!(parse(&args), expected.map_err(str::to_owned), "{args:?}");
    }

    #[test]
    fn chaos_arguments_are_parsed_and_bad_ones_refused() {
        check(&[], Ok((10, &SUITE, false)));
        check(&["--minutes", "1"], Ok((1, &SUITE, false)));
        check(
            &["--test", "chaos_mcp", "--release", "--minutes", "30"],
            Ok((30, &["chaos_mcp"], true)),
        );
        check(
            &["--test", "chaos", "--test", "chaos_mcp"],
            Ok((10, &SUITE, false)),
        );
        for bad in [&["--minutes"][..], &["--minutes", "0"], &["--minutes", "x"]] {
            check(bad, Err("--minutes takes a whole number above zero"));
        }
        check(&["--test"], Err("--test takes a test file name"));
        check(
            &["--test", "cli"],
            Err("`cli` is not a chaos test file; they are: chaos, chaos_mcp"),
        );
        check(&["--seconds", "5"], Err("unknown argument `--seconds`"));
    }

    #[test]
    fn every_chaos_test_file_exists() {
        for test in SUITE {
            let path = root().join(format!("crates/repo-search-cli/tests/{test}.rs"));
            assert!(path.is_file(), "{test}");
        }
    }
}
