//! The real ripgrep as an oracle: where the pinned `rg` lives, and what `rg -F` finds.
//!
//! Never skipped: a missing peer is a failed test with instructions, not a pass.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The pinned ripgrep that `cargo xtask tools` installs, or `REPO_SEARCH_RG` when set. Panics with
/// instructions when it is missing.
pub fn rg() -> PathBuf {
    if let Some(p) = std::env::var_os("REPO_SEARCH_RG") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/tools/bin")
        .join(format!("rg{}", std::env::consts::EXE_SUFFIX));
    assert!(
        p.exists(),
        "ripgrep is not installed at {}: run `cargo xtask tools` (or `cargo xtask ci`)",
        p.display()
    );
    p
}

/// (path, line, column) of every match `rg -F` finds under `root`, optionally filtered by scope.
pub fn rg_hits(
    root: &Path,
    query: &str,
    case_insensitive: bool,
    scope: Option<&str>,
) -> BTreeSet<(String, u64, u64)> {
    let mut cmd = Command::new(rg());
    cmd.current_dir(root)
        .env_remove("RIPGREP_CONFIG_PATH")
        .args(["--no-config", "--json", "--fixed-strings"]);
    if case_insensitive {
        cmd.arg("--ignore-case");
    } else {
        cmd.arg("--case-sensitive");
    }
    cmd.arg("--regexp")
        .arg(query)
        .arg("./")
        .stdin(Stdio::null());
    let out = cmd.output().expect("run rg");
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "rg failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut set = BTreeSet::new();
    for line in out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).expect("rg --json line");
        if v["type"] != "match" {
            continue;
        }
        let Some(path) = v["data"]["path"]["text"].as_str() else {
            continue; // non-UTF-8 path: reported as bytes by rg, skipped (and counted) by us
        };
        let path = path.strip_prefix("./").unwrap_or(path).to_owned();
        if let Some(s) = scope
            && !(path == s || path.starts_with(&format!("{s}/")))
        {
            continue;
        }
        let line_no = v["data"]["line_number"].as_u64().expect("line number");
        let col = v["data"]["submatches"][0]["start"]
            .as_u64()
            .expect("submatch")
            + 1;
        set.insert((path, line_no, col));
    }
    set
}

/// The files `rg --files` lists under `root`: ripgrep's selection, without searching anything.
/// Paths are repo-relative and `/`-separated; a non-UTF-8 name is listed lossily, so it can only
/// ever show up as a difference.
pub fn rg_files(root: &Path) -> BTreeSet<String> {
    let out = Command::new(rg())
        .current_dir(root)
        .env_remove("RIPGREP_CONFIG_PATH")
        .args(["--no-config", "--files"])
        .stdin(Stdio::null())
        .output()
        .expect("run rg");
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "rg --files failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}
