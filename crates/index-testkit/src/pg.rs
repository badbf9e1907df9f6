//! A throwaway PostgreSQL cluster for a test binary: the harness re-executes itself inside
//! `pg_virtualenv` (Debian's `postgresql-common`; `cargo xtask tools` installs it), which creates a
//! cluster, exports the `PG*` variables and drops the cluster when the binary exits.
//!
//! Never skipped: without `pg_virtualenv` the test fails with what to install.

use std::process::Command;

/// Set in the re-executed binary, so that a `pg_virtualenv` that exports no `PGHOST` is an error
/// rather than an endless re-execution.
const INSIDE: &str = "INDEX_TESTKIT_INSIDE_PG_VIRTUALENV";

/// Runs the rest of a test `main` inside a throwaway cluster: outside one (no `PGHOST`), this
/// re-executes the current binary with the same arguments under `pg_virtualenv` and exits with its
/// status; inside, it returns the name filters given on the command line (the arguments that are
/// not options), which a harness applies to its cases.
pub fn in_throwaway_cluster() -> Vec<String> {
    if std::env::var_os("PGHOST").is_none() {
        assert!(
            std::env::var_os(INSIDE).is_none(),
            "pg_virtualenv did not export PGHOST"
        );
        let exe = std::env::current_exe().expect("test executable");
        // UTF-8 locale: the cluster must be created with the UTF8 encoding. `-t`: a cluster in a
        // temporary directory even as root, so that concurrent runs never share one.
        let status = Command::new("pg_virtualenv")
            .env("LANG", "C.UTF-8")
            .env("LC_ALL", "C.UTF-8")
            .env(INSIDE, "1")
            .arg("-t")
            .arg(exe)
            .args(std::env::args_os().skip(1))
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run pg_virtualenv ({e}): install PostgreSQL with `cargo xtask tools`"
                )
            });
        std::process::exit(status.code().unwrap_or(1));
    }
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect()
}
