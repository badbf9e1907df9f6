//! The human `search` output against ripgrep's, byte for byte: every hit printed (pages are
//! streamed, so nobody is cut at the tool's cap), context lines and group separators, `-l`, `-c`,
//! regexes, globs and types. The literal mode is the one that honours every option.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_repo-search");

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A git worktree with a file of 2 500 matching lines (more than two pages), adjacent and
/// separate matches for context, an ignored file and a hidden one.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    assert!(
        Command::new("git")
            .current_dir(root)
            .args(["init", "-q"])
            .status()
            .unwrap()
            .success()
    );
    let many: String = (0..2500).map(|i| format!("needle {i}\n")).collect();
    write(root, "big/many.txt", &many);
    write(
        root,
        "src/lib.rs",
        "fn alpha() {}\nlet x = needle;\nlet y = needle;\n\n\n\nfn needle_fn() {}\nend\n",
    );
    write(root, "src/main.py", "def needle():\n    pass\n# needle\n");
    write(root, "docs/a.md", "a needle in docs\nNEEDLE loud\n");
    write(root, ".gitignore", "ignored.txt\n");
    write(root, "ignored.txt", "needle ignored\n");
    write(root, ".hidden/h.txt", "needle hidden\n");
    dir
}

/// Our output and rg's for the same options; `ours` are `search` flags, `theirs` rg flags. A
/// trailing `src` in `theirs` is rg's path argument, given after the pattern.
fn check(root: &Path, query: &str, ours: &[&str], theirs: &[&str]) {
    let (theirs, paths) = match theirs.split_last() {
        Some((&"src", flags)) => (flags, &["src"][..]),
        _ => (theirs, &[][..]),
    };
    let mut args = vec!["search", query, "--mode", "literal"];
    args.extend_from_slice(ours);
    let mine = Command::new(BIN)
        .current_dir(root)
        .args(&args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        mine.status.code().is_some_and(|c| c <= 1),
        "{args:?}: {}",
        String::from_utf8_lossy(&mine.stderr)
    );
    let rg = Command::new(index_testkit::rg::rg())
        .current_dir(root)
        .args([
            "--no-config",
            "--sort",
            "path",
            "--no-heading",
            "--color",
            "never",
        ])
        .args(theirs)
        .arg("--")
        .arg(query)
        .args(paths)
        .output()
        .unwrap();
    let (mine, rg) = (
        String::from_utf8(mine.stdout).unwrap(),
        String::from_utf8(rg.stdout).unwrap(),
    );
    if mine != rg {
        let diff = mine
            .lines()
            .zip(rg.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(mine.lines().count().min(rg.lines().count()));
        panic!(
            "{args:?} vs rg {theirs:?}: outputs differ at line {diff} ({} vs {} lines)\nours: {:?}\nrg:   {:?}",
            mine.lines().count(),
            rg.lines().count(),
            mine.lines().nth(diff),
            rg.lines().nth(diff),
        );
    }
}

#[test]
fn human_output_equals_ripgreps_for_every_option() {
    let dir = tree();
    let root = dir.path();
    let lines = ["-F", "-n", "--column"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        lines.iter().copied().chain(extra.iter().copied()).collect()
    };
    // Every hit, across pages.
    check(root, "needle", &[], &with(&[]));
    check(root, "needle", &["-i"], &with(&["-i"]));
    // Context: groups, overlaps and separators.
    for (ours, theirs) in [
        (&["-A", "1"][..], &["-A", "1"][..]),
        (&["-B", "2"], &["-B", "2"]),
        (&["-C", "1"], &["-C", "1"]),
        (&["-A", "3", "-B", "1"], &["-A", "3", "-B", "1"]),
    ] {
        check(
            root,
            "needle",
            &[&["--path", "src"], ours].concat(),
            &with(&[theirs, &["src"]].concat()),
        );
    }
    // Context across a page boundary: in `big/many.txt` every line matches, so the line after
    // a page's last hit is the next page's first hit, a match and not a context line.
    check(root, "needle", &["-A", "1"], &with(&["-A", "1"]));
    check(root, "needle", &["-C", "2"], &with(&["-C", "2"]));
    // Files and counts.
    check(root, "needle", &["-l"], &["-F", "-l"]);
    check(root, "needle", &["-c"], &["-F", "-c"]);
    // Regexes, globs, types, hidden and ignored files.
    check(root, r"needle_?[a-z]*\(", &["--regex"], &["-n", "--column"]);
    check(
        root,
        "needle",
        &["-g", "*.rs", "-g", "*.md"],
        &with(&["-g", "*.rs", "-g", "*.md"]),
    );
    check(
        root,
        "needle",
        &["-g", "!big/**"],
        &with(&["-g", "!big/**"]),
    );
    check(root, "needle", &["-t", "py"], &with(&["-t", "py"]));
    check(root, "needle", &["-t", "all"], &with(&["-t", "all"]));
    check(
        root,
        "needle",
        &["--hidden", "-l"],
        &["-F", "-l", "--hidden"],
    );
    check(
        root,
        "needle",
        &["--no-ignore", "-l"],
        &["-F", "-l", "--no-ignore"],
    );
}

#[test]
fn max_results_prints_that_many_hits_and_says_nothing_more() {
    let dir = tree();
    let out = Command::new(BIN)
        .current_dir(dir.path())
        .args([
            "search",
            "needle",
            "--mode",
            "literal",
            "--max-results",
            "1500",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1500);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The files a search prints, one per line with `-l`, sorted: an index mode prints them best
/// first, rg in path order.
fn sorted_lines(out: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(out)
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn the_default_mode_serves_hidden_and_ignored_files_as_rg_selects_them() {
    let dir = tree();
    let root = dir.path();
    for flags in [
        &["--hidden"][..],
        &["--no-ignore"],
        &["--hidden", "--no-ignore"],
        &["--hidden", "-t", "txt"],
        &["--no-ignore", "-g", "!big/**"],
    ] {
        // No `--mode`: the default, `indexed_literal`, which builds the index on first use.
        let mine = Command::new(BIN)
            .current_dir(root)
            .args(["search", "needle", "-l", "--json"])
            .args(flags)
            .output()
            .unwrap();
        assert_eq!(
            mine.status.code(),
            Some(0),
            "{flags:?}: {}",
            String::from_utf8_lossy(&mine.stderr)
        );
        let answer: serde_json::Value = serde_json::from_slice(&mine.stdout).unwrap();
        assert_eq!(answer["mode"], "indexed_literal", "{flags:?}");
        let mut paths: Vec<String> = answer["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["path"].as_str().unwrap().to_owned())
            .collect();
        paths.sort();
        let rg = Command::new(index_testkit::rg::rg())
            .current_dir(root)
            .args(["--no-config", "-F", "-l"])
            .args(flags)
            .args(["--", "needle"])
            .output()
            .unwrap();
        assert_eq!(paths, sorted_lines(&rg.stdout), "{flags:?}");
    }
}
