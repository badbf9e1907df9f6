//! The real ripgrep as an oracle: where the pinned `rg` lives, and what it finds for a request
//! (`rg -F` or a regex, with the request's file filters, context, `-l` and `-c`).
//!
//! Never skipped: a missing peer is a failed test with instructions, not a pass.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use index_contract::SearchRequest;

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
    rg_files_with(root, &[])
}

/// The files `rg --files` lists under `root` with `flags` (`--hidden`, say).
pub fn rg_files_with(root: &Path, flags: &[&str]) -> BTreeSet<String> {
    let out = Command::new(rg())
        .current_dir(root)
        .env_remove("RIPGREP_CONFIG_PATH")
        .args(["--no-config", "--files"])
        .args(flags)
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

/// One matching line as `rg --json` reports it, with its context lines as a hit carries them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RgLine {
    /// Repo-relative path.
    pub path: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based byte column of the first match.
    pub column: u64,
    /// The `-B` lines before it, nearest last, without terminators, cut to the cap given.
    pub before: Vec<String>,
    /// The `-A` lines after it, nearest first, likewise.
    pub after: Vec<String>,
}

/// The ripgrep command for `request`, as the literal search answers it: `-F` unless `regex`, `-U`
/// when `multiline`, `-i` or `-s`, `-g` and `-t` in order, `--hidden`, `--no-ignore`, and `-B`/`-A`. The scope is not
/// passed (rg would see paths differently); callers filter by it.
pub fn rg_command(root: &Path, request: &SearchRequest) -> Command {
    let mut cmd = Command::new(rg());
    cmd.current_dir(root)
        .env_remove("RIPGREP_CONFIG_PATH")
        .arg("--no-config")
        .stdin(Stdio::null());
    if !request.regex {
        cmd.arg("--fixed-strings");
    }
    if request.multiline {
        cmd.arg("--multiline");
    }
    cmd.arg(if request.case_insensitive {
        "--ignore-case"
    } else {
        "--case-sensitive"
    });
    for glob in &request.files.globs {
        cmd.arg("--glob").arg(glob);
    }
    for ty in &request.files.types {
        cmd.arg("--type").arg(ty);
    }
    if request.files.include_hidden {
        cmd.arg("--hidden");
    }
    if request.files.include_ignored {
        cmd.arg("--no-ignore");
    }
    if request.context.before > 0 {
        cmd.arg(format!("--before-context={}", request.context.before));
    }
    if request.context.after > 0 {
        cmd.arg(format!("--after-context={}", request.context.after));
    }
    cmd
}

fn run(mut cmd: Command, request: &SearchRequest) -> Vec<u8> {
    cmd.arg("--regexp").arg(&request.query).arg("./");
    let out = cmd.output().expect("run rg");
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "rg failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn in_scope(path: &str, scope: Option<&str>) -> bool {
    scope.is_none_or(|s| path == s || path.starts_with(&format!("{s}/")))
}

/// Every hit `rg --json` reports for `request` under `root`, in (path, line, column) order
/// (paths compared as strings), each with its context lines (`request.context`) cut to
/// `line_bytes` as the literal search cuts them. Files with non-UTF-8 names are left out.
///
/// A hit is a matching line at its first match; with `multiline`, when the query can match a line
/// break, every match is a hit, at the line where it starts. Whether it can is read off rg itself:
/// `rg -c -U` counts matches then (as `--count-matches` does), and lines otherwise.
pub fn rg_lines(root: &Path, request: &SearchRequest, line_bytes: usize) -> Vec<RgLine> {
    let per_match =
        request.multiline && rg_per_file(root, request, true) == rg_count_matches(root, request);
    let mut cmd = rg_command(root, request);
    cmd.arg("--json");
    let stdout = run(cmd, request);
    // Every line rg printed (match or context), per file, then each match's neighbours.
    let mut printed: BTreeMap<String, BTreeMap<u64, String>> = BTreeMap::new();
    let mut matches = Vec::new();
    for line in stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).expect("rg --json line");
        let kind = v["type"].as_str().unwrap_or("");
        if kind != "match" && kind != "context" {
            continue;
        }
        let data = &v["data"];
        let Some(path) = data["path"]["text"].as_str() else {
            continue;
        };
        let path = path.strip_prefix("./").unwrap_or(path).to_owned();
        if !in_scope(&path, request.path.as_deref()) {
            continue;
        }
        let line_no = data["line_number"].as_u64().expect("line number");
        // A multi-line match reports a block of lines at once.
        let text = json_bytes(&data["lines"]);
        let file = printed.entry(path.clone()).or_default();
        for (i, l) in text.split_inclusive(|&b| b == b'\n').enumerate() {
            file.insert(line_no + i as u64, context_line(l, line_bytes));
        }
        if kind != "match" {
            continue;
        }
        let submatches = data["submatches"].as_array().expect("submatches");
        let taken = if per_match { submatches.len() } else { 1 };
        for m in &submatches[..taken] {
            let start = m["start"].as_u64().expect("submatch") as usize;
            let head = &text[..start];
            let line = line_no + head.iter().filter(|&&b| b == b'\n').count() as u64;
            let line_start = head.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            matches.push((path.clone(), line, (start - line_start) as u64 + 1));
        }
    }
    let (before, after) = (
        u64::from(request.context.before),
        u64::from(request.context.after),
    );
    let mut lines: Vec<RgLine> = matches
        .into_iter()
        .map(|(path, line, column)| {
            let file = &printed[&path];
            let around = |range: std::ops::RangeInclusive<u64>| -> Vec<String> {
                range.filter_map(|n| file.get(&n).cloned()).collect()
            };
            RgLine {
                before: around(line.saturating_sub(before).max(1)..=line - 1),
                after: around(line + 1..=line + after),
                path,
                line,
                column,
            }
        })
        .collect();
    lines.sort();
    lines
}

/// `rg --count-matches` for `request` under `root`: each matching file with its number of
/// matches.
fn rg_count_matches(root: &Path, request: &SearchRequest) -> BTreeMap<String, u64> {
    let mut cmd = rg_command(root, request);
    cmd.arg("--null").arg("--count-matches");
    parse_counts(&run(cmd, request), request)
}

/// `rg --count` (when `count`) or `rg --files-with-matches` for `request` under `root`: each
/// matching file with its count of matching lines (1 for `--files-with-matches`). Files with
/// non-UTF-8 names are left out.
pub fn rg_per_file(root: &Path, request: &SearchRequest, count: bool) -> BTreeMap<String, u64> {
    let mut cmd = rg_command(root, request);
    cmd.arg("--null").arg(if count {
        "--count"
    } else {
        "--files-with-matches"
    });
    let stdout = run(cmd, request);
    if count {
        return parse_counts(&stdout, request);
    }
    let mut out = BTreeMap::new();
    for path in stdout.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        insert_in_scope(&mut out, path, 1, request);
    }
    out
}

/// Parses `path NUL count` lines (`--null` with `--count` or `--count-matches`).
fn parse_counts(stdout: &[u8], request: &SearchRequest) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for record in stdout.split(|&b| b == b'\n').filter(|r| !r.is_empty()) {
        let nul = record.iter().position(|&b| b == 0).expect("--null");
        let n: u64 = std::str::from_utf8(&record[nul + 1..])
            .expect("count")
            .parse()
            .expect("count");
        insert_in_scope(&mut out, &record[..nul], n, request);
    }
    out
}

fn insert_in_scope(out: &mut BTreeMap<String, u64>, path: &[u8], n: u64, request: &SearchRequest) {
    let Ok(path) = std::str::from_utf8(path) else {
        return;
    };
    let path = path.strip_prefix("./").unwrap_or(path);
    if in_scope(path, request.path.as_deref()) {
        out.insert(path.to_owned(), n);
    }
}

/// The bytes of an `rg --json` data field: `{"text": ...}` or `{"bytes": base64}`.
fn json_bytes(v: &serde_json::Value) -> Vec<u8> {
    if let Some(text) = v["text"].as_str() {
        return text.as_bytes().to_vec();
    }
    base64(v["bytes"].as_str().expect("text or bytes"))
}

fn base64(s: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let mut n = 0u32;
        for (i, &c) in data.iter().enumerate() {
            n |= value(c) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..data.len()]);
    }
    out
}

/// A line as a hit's context carries it: no terminator, lossy UTF-8, cut to `cap` bytes on a
/// character boundary.
pub fn context_line(line: &[u8], cap: usize) -> String {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    let mut end = text.len().min(cap);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Ripgrep's first matching line per file under `root`, as the probes compare an index with it
/// (`rg --max-count 1`, fixed strings unless `regex`, case-sensitive): path → 1-based line. `rg`
/// is the binary to run (a probe's peer, named on its command line).
pub fn rg_first_lines(rg: &Path, root: &Path, query: &str, regex: bool) -> BTreeMap<String, u64> {
    let out = Command::new(rg)
        .current_dir(root)
        .args([
            "--no-config",
            if regex { "--case-sensitive" } else { "-F" },
            "--line-number",
            "--no-heading",
            "--with-filename",
            "--max-count",
            "1",
            "--regexp",
            query,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("rg");
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut parts = line.splitn(3, ':');
        if let (Some(p), Some(l)) = (parts.next(), parts.next()) {
            m.insert(p.to_owned(), l.parse().unwrap_or(0));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_decodes_every_padding() {
        for (encoded, decoded) in [
            ("", &b""[..]),
            ("Zg==", b"f"),
            ("Zm8=", b"fo"),
            ("Zm9v", b"foo"),
            ("Y2Fm6SD/", b"caf\xe9 \xff"),
        ] {
            assert_eq!(super::base64(encoded), decoded, "{encoded}");
        }
    }
}
