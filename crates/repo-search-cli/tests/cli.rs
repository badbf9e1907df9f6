//! End to end: the `repo-search` binary on temporary git repositories. After every step the
//! indexed answer equals the literal answer (first match per file), and no hit ever comes from a
//! deleted file.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use index_contract::ErrorCode;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_repo-search");

fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["config", "user.email", "t@example.invalid"]);
    git(dir.path(), &["config", "user.name", "t"]);
    dir
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn run(root: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(root)
        .args(args)
        .output()
        .unwrap()
}

fn search(root: &Path, query: &str, mode: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "search",
        query,
        "--json",
        "--mode",
        mode,
        "--max-results",
        "1000",
    ];
    args.extend_from_slice(extra);
    let out = run(root, &args);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{mode} {query}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn first_per_file(v: &Value) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for h in v["hits"].as_array().unwrap() {
        m.entry(h["path"].as_str().unwrap().to_owned())
            .or_insert((h["line"].as_u64().unwrap(), h["column"].as_u64().unwrap()));
    }
    m
}

/// The indexed answer equals the literal one, for each query, in both case modes and a scope;
/// every indexed hit names a file that exists. Returns the indexed files for `queries[0]`.
fn check(root: &Path, queries: &[&str]) -> Vec<String> {
    let mut first = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        for extra in [&[][..], &["-i"][..], &["--path", "src"][..]] {
            let indexed = search(root, q, "indexed_literal", extra);
            let literal = search(root, q, "literal", extra);
            assert_eq!(indexed["untrusted_index"], true);
            assert_eq!(
                first_per_file(&indexed),
                first_per_file(&literal),
                "query {q:?} {extra:?}"
            );
            for h in indexed["hits"].as_array().unwrap() {
                assert!(
                    root.join(h["path"].as_str().unwrap()).is_file(),
                    "hit from a missing file: {h}"
                );
            }
            if i == 0 && extra.is_empty() {
                first = first_per_file(&indexed).into_keys().collect();
            }
        }
    }
    first
}

#[test]
fn the_index_follows_every_kind_of_change() {
    let dir = repo();
    let root = dir.path();
    write(root, "src/a.rs", "fn alpha() { needle(); }\n");
    write(root, "src/b.rs", "fn beta() {}\n// needle here too\n");
    write(root, "docs/c.md", "Needle in docs\n");
    write(root, ".gitignore", "target/\n*.log\n");
    write(root, "target/build.rs", "needle in ignored output\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);

    // First use: a full build.
    // "Needle" in docs/c.md differs in case: only the -i run finds it.
    assert_eq!(check(root, &["needle", "fn "]), ["src/a.rs", "src/b.rs"]);
    let status: Value = serde_json::from_slice(&run(root, &["status", "--json"]).stdout).unwrap();
    assert_eq!(status["status"]["state"], "ready");
    let rev1 = status["status"]["source_revision"]
        .as_str()
        .unwrap()
        .to_owned();

    // A commit that edits, adds, deletes and renames.
    write(root, "src/a.rs", "fn alpha() {}\n");
    write(root, "src/new.rs", "fn gamma() { needle(); }\n");
    std::fs::remove_file(root.join("src/b.rs")).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "two"]);
    git(root, &["mv", "src/new.rs", "src/renamed.rs"]);
    git(root, &["commit", "-qm", "three"]);
    assert_eq!(check(root, &["needle", "gamma"]), ["src/renamed.rs"]);

    // Uncommitted edits, an untracked file, an ignored file, a deleted tracked file.
    write(root, "src/a.rs", "fn alpha() { needle_dirty(); }\n");
    write(root, "src/untracked.rs", "needle untracked\n");
    write(root, "debug.log", "needle in an ignored log\n");
    std::fs::remove_file(root.join("docs/c.md")).unwrap();
    assert_eq!(
        check(root, &["needle", "Needle"]),
        ["src/a.rs", "src/renamed.rs", "src/untracked.rs"]
    );
    let status: Value = serde_json::from_slice(&run(root, &["status", "--json"]).stdout).unwrap();
    let rev_dirty = status["status"]["source_revision"]
        .as_str()
        .unwrap()
        .to_owned();
    // The revision names HEAD and the index generation: new for every commit of the index.
    let head = Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .unwrap()
        .stdout;
    let head = String::from_utf8(head).unwrap();
    assert!(
        rev_dirty.starts_with(&format!("{}+g", head.trim())),
        "{rev_dirty}"
    );
    assert_ne!(rev_dirty, rev1);

    // An edit to .gitignore changes the selection: the index follows it.
    write(root, ".gitignore", "target/\n*.log\nsrc/untracked.rs\n");
    assert_eq!(check(root, &["needle"]), ["src/a.rs", "src/renamed.rs"]);

    // A branch switch.
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "four"]);
    git(root, &["checkout", "-q", "-b", "other", "HEAD~3"]);
    // The old .gitignore does not ignore src/untracked.rs (still on disk, untracked): it is back.
    assert_eq!(
        check(root, &["needle", "beta"]),
        ["src/a.rs", "src/b.rs", "src/untracked.rs"]
    );
    git(root, &["checkout", "-q", "main"]);
    assert_eq!(check(root, &["needle"]), ["src/a.rs", "src/renamed.rs"]);

    // Once no file is younger than the racy window, a query that finds nothing changed and a
    // recent commit writes nothing: the revision and commit time stay.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    search(root, "needle", "indexed_literal", &[]);
    let before: Value = serde_json::from_slice(&run(root, &["status", "--json"]).stdout).unwrap();
    search(root, "needle", "indexed-literal", &[]); // the kebab-case alias works too
    let after: Value = serde_json::from_slice(&run(root, &["status", "--json"]).stdout).unwrap();
    assert_eq!(
        after["status"]["updated_at"],
        before["status"]["updated_at"]
    );
    assert_eq!(
        after["status"]["source_revision"],
        before["status"]["source_revision"]
    );
}

#[test]
fn exit_codes_and_errors() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "hello\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    // First use builds the index; off a terminal it prints nothing but the answer.
    let hit = run(root, &["search", "hello"]);
    assert_eq!(hit.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&hit.stdout), "a.txt:1:1:hello\n");
    assert_eq!(
        String::from_utf8_lossy(&hit.stderr),
        "",
        "the first build printed off a terminal"
    );
    assert_eq!(run(root, &["search", "absent"]).status.code(), Some(1));
    let bad = run(root, &["search", "hello", "--path", "../x"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains(ErrorCode::Untrusted.as_str()) && err.contains("hint:"),
        "{err}"
    );
    let json = run(root, &["search", "hello", "--path", "../x", "--json"]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["code"], ErrorCode::Untrusted.as_str());
    // The index never lives inside the searchable tree.
    let inside = run(root, &["search", "hello", "--index-dir", "idx"]);
    assert_eq!(inside.status.code(), Some(2));
    // Outside the worktree, a clear error.
    let outside = tempfile::tempdir().unwrap();
    let out = run(outside.path(), &["search", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a git worktree"));
}

#[test]
fn a_damaged_index_is_rebuilt_not_served() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "hello\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    assert_eq!(run(root, &["search", "hello"]).status.code(), Some(0));
    let idx = root.join(".git/repo-search");
    for e in std::fs::read_dir(&idx).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "idx") {
            let mut b = std::fs::read(&p).unwrap();
            let n = b.len() / 2;
            b[n] ^= 1;
            std::fs::write(&p, b).unwrap();
        }
    }
    let status: Value = serde_json::from_slice(&run(root, &["status", "--json"]).stdout).unwrap();
    assert_eq!(status["status"]["state"], "failed");
    // The next query notices and rebuilds before answering.
    let out = run(root, &["search", "hello"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a.txt:1:1:hello\n");
}

#[test]
fn schema_command_prints_the_tool_schema() {
    let out = Command::new(BIN)
        .args(["schema", "--modes", "literal"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["properties"]["mode"]["enum"],
        serde_json::json!(["literal"])
    );
    let out = Command::new(BIN).args(["schema"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["properties"]["mode"]["enum"],
        serde_json::json!(["literal", "indexed_literal"])
    );
}

/// Runs a command that must fail under `--json`: exit 2, and on stdout exactly one
/// `{"code", "message"}` object whose code is `expected` and whose message names no path of this
/// machine. Returns the message.
fn check_error(dir: &Path, args: &[&str], expected: ErrorCode) -> String {
    let out = run(dir, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: stdout is not one JSON object ({e}): {stderr}"));
    let object = v.as_object().unwrap();
    assert_eq!(object.len(), 2, "{args:?}: {v}");
    assert_eq!(v["code"], expected.as_str(), "{args:?}: {v}");
    let message = v["message"].as_str().unwrap().to_owned();
    let tmp = std::env::temp_dir();
    assert!(
        !message.contains(tmp.to_str().unwrap()) && !message.contains("fatal"),
        "{args:?}: {message}"
    );
    message
}

#[test]
fn every_error_under_json_is_a_code_and_a_message_on_stdout() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "hello\n");
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let file = file.to_str().unwrap();
    let cases: [(&Path, Vec<&str>, ErrorCode); 12] = [
        (
            outside.path(),
            vec!["search", "x", "--json"],
            ErrorCode::Unsupported,
        ),
        (
            outside.path(),
            vec!["status", "--json"],
            ErrorCode::Unsupported,
        ),
        (
            root,
            vec!["search", "x", "--json", "--root", "missing"],
            ErrorCode::Unsupported,
        ),
        (
            root,
            vec!["search", "x", "--json", "--root", "a.txt"],
            ErrorCode::Unsupported,
        ),
        (
            root,
            vec!["search", "x", "--json", "--index-dir", "idx"],
            ErrorCode::Untrusted,
        ),
        (
            root,
            vec!["status", "--json", "--index-dir", "idx"],
            ErrorCode::Untrusted,
        ),
        (
            root,
            vec!["search", "x", "--json", "--index-dir", file],
            ErrorCode::Failed,
        ),
        // clap's usage errors: a missing query, an unknown flag, an unknown mode.
        (root, vec!["search", "--json"], ErrorCode::Unsupported),
        (
            root,
            vec!["search", "x", "--json", "--bogus"],
            ErrorCode::Unsupported,
        ),
        (
            root,
            vec!["search", "x", "--json", "--mode", "fuzzy"],
            ErrorCode::Unsupported,
        ),
        (
            root,
            vec!["search", "x", "--json", "--max-results", "-1"],
            ErrorCode::Unsupported,
        ),
        (
            root,
            vec!["search", "x", "--json", "--max-results", "100000"],
            ErrorCode::Limit,
        ),
    ];
    for (dir, args, code) in cases {
        check_error(dir, &args, code);
    }
    assert_eq!(
        check_error(
            outside.path(),
            &["search", "x", "--json"],
            ErrorCode::Unsupported
        ),
        "not a git worktree: --root is not inside one"
    );
    // Without --json nothing goes to stdout, and stderr names the code.
    let out = run(outside.path(), &["search", "x"]);
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(ErrorCode::Unsupported.as_str()) && err.contains("not a git worktree"));
}

#[test]
fn an_unusable_index_dir_under_json_carries_its_code_and_no_os_text() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "hello\n");
    // Git is not the judge of freshness: a damaged git index does not stop a refresh.
    std::fs::write(root.join(".git/index"), b"DIRC garbage").unwrap();
    assert_eq!(
        search(root, "hello", "indexed_literal", &[])["hits"][0]["path"],
        "a.txt"
    );
    // No usable index directory anywhere: the git directory's is a file, and the cache
    // directory lies below a file.
    std::fs::remove_dir_all(root.join(".git/repo-search")).unwrap();
    std::fs::write(root.join(".git/repo-search"), b"not a directory").unwrap();
    let blocker = root.join(".git/cache-blocker");
    std::fs::write(&blocker, b"").unwrap();
    let out = Command::new(BIN)
        .current_dir(root)
        .env("XDG_CACHE_HOME", blocker.join("cache"))
        .args(["search", "hello", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], ErrorCode::Failed.as_str());
    let message = v["message"].as_str().unwrap();
    assert!(
        !message.contains("cache-blocker") && !message.contains("os error"),
        "{message}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--mode literal"), "{err}");
    // The literal mode needs no index.
    assert_eq!(
        search(root, "hello", "literal", &[])["hits"][0]["path"],
        "a.txt"
    );
}

/// The static model is built in: `semantic` answers with nothing installed (an empty cache, no
/// model directory), and the schema offers it as `mcp` does.
#[test]
fn semantic_mode_answers_with_nothing_installed() {
    let dir = repo();
    let root = dir.path();
    write(
        root,
        "greet.py",
        "def say_hello(name):\n    print('hello', name)\n",
    );
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(root)
        .env_remove("REPO_SEARCH_MODEL_DIR")
        .env("XDG_CACHE_HOME", cache.path())
        .env("HOME", cache.path())
        .args([
            "search",
            "--json",
            "--mode",
            "semantic",
            "greet someone by name",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "semantic", "{v}");
    assert_eq!(v["hits"][0]["path"], "greet.py", "{v}");
    let out = run(root, &["schema", "--modes", "semantic"]);
    assert_eq!(out.status.code(), Some(0));
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(schema["properties"]["mode"]["enum"], json!(["semantic"]));
}

#[test]
fn a_missing_or_symlinked_path_gets_the_same_answer_in_both_modes() {
    let dir = repo();
    let root = dir.path();
    write(root, "real/a.txt", "hello\n");
    std::os::unix::fs::symlink("real", root.join("link")).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("real/alias.txt")).unwrap();
    for (path, code) in [
        ("missing", ErrorCode::Unsupported),
        ("real/missing.txt", ErrorCode::Unsupported),
        ("link", ErrorCode::Untrusted),
        ("link/a.txt", ErrorCode::Untrusted),
        ("real/alias.txt", ErrorCode::Untrusted),
    ] {
        let literal = check_error(
            root,
            &[
                "search", "hello", "--json", "--mode", "literal", "--path", path,
            ],
            code,
        );
        let indexed = check_error(
            root,
            &[
                "search",
                "hello",
                "--json",
                "--mode",
                "indexed_literal",
                "--path",
                path,
            ],
            code,
        );
        assert_eq!(literal, indexed, "{path}");
    }
    // The real directory answers in both.
    assert_eq!(
        first_per_file(&search(
            root,
            "hello",
            "indexed_literal",
            &["--path", "real"]
        )),
        first_per_file(&search(root, "hello", "literal", &["--path", "real"]))
    );
}

/// A command that must fail: exit 2, and its stderr (`code: message` then `hint: …`).
fn failing(root: &Path, args: &[&str]) -> String {
    let out = run(root, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

#[test]
fn every_hint_names_the_real_cause_and_the_real_fix() {
    let dir = repo();
    let root = dir.path();
    for i in 0..3 {
        write(root, &format!("f{i}.txt"), "hello\n");
    }
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    // An offset over the cap: narrow the query, not "lower --max-results".
    let err = failing(root, &["search", "hello", "--offset", "200000"]);
    assert!(
        err.contains("ERR_PRISM_INDEX_LIMIT") && err.contains("hint: --offset is at most 100000"),
        "{err}"
    );
    // --index-dir naming a file: the documented message.
    let err = failing(
        root,
        &["search", "hello", "--index-dir", file.to_str().unwrap()],
    );
    assert!(
        err.contains(
            "ERR_PRISM_INDEX_FAILED: --index-dir cannot be created, or is not a directory"
        ),
        "{err}"
    );
    // A literal page whose earlier hits changed: start again, not "run repo-search index".
    let first = run(
        root,
        &[
            "search",
            "hello",
            "--mode",
            "literal",
            "--max-results",
            "1",
            "--json",
        ],
    );
    let first: Value = serde_json::from_slice(&first.stdout).unwrap();
    let token = first["page_token"].as_str().unwrap().to_owned();
    write(root, "a-first.txt", "hello\n");
    let err = failing(
        root,
        &[
            "search",
            "hello",
            "--mode",
            "literal",
            "--max-results",
            "1",
            "--offset",
            "1",
            "--page-token",
            &token,
        ],
    );
    assert!(
        err.contains("ERR_PRISM_INDEX_STALE")
            && err.contains("search again from the first page")
            && !err.contains("repo-search index"),
        "{err}"
    );
}

#[test]
fn a_full_disk_is_reported_as_full_not_as_a_damaged_index() {
    let dir = repo();
    let root = dir.path();
    // More text than the 64 KiB device below can index: many distinct trigrams in many files,
    // which no postings codec fits in it.
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..256 {
        let text: String = (0..200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("{x:016x} hello\n")
            })
            .collect();
        write(root, &format!("src/f{i}.txt"), &text);
    }
    let index = tempfile::tempdir().unwrap();
    // A small tmpfs of this test's own, in a user and mount namespace (util-linux `unshare`).
    let script = format!(
        "mount -t tmpfs -o size=64k tmpfs '{}' && exec '{}' search hello --index-dir '{}'",
        index.path().display(),
        BIN,
        index.path().display()
    );
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", &script])
        .current_dir(root)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "ERR_PRISM_INDEX_FAILED: the index could not be written: the device \
                         holding the index directory is full"
        ) && stderr.contains("not damaged")
            && !stderr.contains("damaged or could not be read"),
        "{stderr}"
    );
}

#[test]
fn status_prints_an_iso_date_and_an_age_for_a_person_and_millis_under_json() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "hello\n");
    search(root, "hello", "indexed_literal", &[]);
    let out = run(root, &["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let updated = text
        .lines()
        .find_map(|l| l.strip_prefix("updated:   "))
        .unwrap_or_else(|| panic!("{text}"));
    // `2026-12-02T10:27:07Z (0 s ago)`
    let (date, age) = updated.split_once(' ').unwrap();
    assert!(
        date.len() == 20 && date.ends_with('Z') && date.as_bytes()[10] == b'T',
        "{updated}"
    );
    assert!(age.starts_with('(') && age.ends_with(" ago)"), "{updated}");
    let json = run(root, &["status", "--json"]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(v["status"]["updated_at"].as_u64().unwrap() > 1_700_000_000_000);
}

#[test]
fn the_bash_completion_loads_and_completes_commands_and_flags() {
    let script = format!(
        r#"source <('{BIN}' completions bash) || exit 3
complete -p repo-search || exit 4
COMP_WORDS=(repo-search se); COMP_CWORD=1; COMP_LINE="repo-search se"; COMP_POINT=14
_repo__search repo-search se repo-search; echo "commands: ${{COMPREPLY[*]}}"
COMP_WORDS=(repo-search search --no-ser); COMP_CWORD=2
_repo__search repo-search --no-ser search; echo "flags: ${{COMPREPLY[*]}}""#
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("-F _repo__search repo-search"), "{stdout}");
    assert!(stdout.contains("commands: search serve"), "{stdout}");
    // Options after a command complete too.
    assert!(stdout.contains("flags: --no-server"), "{stdout}");
}

#[test]
fn completions_are_generated_for_every_shell() {
    for (shell, marker) in [
        ("bash", "_repo__search()"),
        ("zsh", "#compdef repo-search"),
        ("fish", "complete -c repo-search"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(marker),
            "{shell}: {}",
            &text[..text.len().min(200)]
        );
    }
}

#[test]
fn the_man_pages_render_with_man_without_warnings() {
    let dir = tempfile::tempdir().unwrap();
    for (command, title) in [
        (None, "repo-search"),
        (Some("search"), "repo-search-search"),
        (Some("mcp"), "repo-search-mcp"),
        (Some("serve"), "repo-search-serve"),
    ] {
        let mut args = vec!["man"];
        args.extend(command);
        let page = Command::new(BIN).args(&args).output().unwrap();
        assert!(page.status.success(), "{args:?}");
        let file = dir.path().join(format!("{title}.1"));
        std::fs::write(&file, &page.stdout).unwrap();
        let out = Command::new("man")
            .arg("-l")
            .arg(&file)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .expect("`man` (man-db) is installed by `cargo xtask tools`");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "{args:?}: groff warned: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("NAME") && text.contains("SYNOPSIS"), "{text}");
        assert!(text.contains(title), "{text}");
    }
    // The page of a command that does not exist is a usage error.
    assert_eq!(
        Command::new(BIN)
            .args(["man", "nope"])
            .output()
            .unwrap()
            .status
            .code(),
        Some(2)
    );
}

/// A matching file whose name is not UTF-8 is counted in both modes, and both say the answer is
/// incomplete; the human output says so on stderr. (rg prints such a name lossily; JSON cannot
/// carry it.)
#[cfg(unix)]
#[test]
fn a_matching_file_whose_name_is_not_utf8_is_counted_in_every_mode() {
    use std::os::unix::ffi::OsStrExt;
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "needle a\n");
    std::fs::write(
        root.join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")),
        "needle bad\n",
    )
    .unwrap();
    for mode in ["literal", "indexed_literal"] {
        let v = search(root, "needle", mode, &[]);
        assert_eq!(v["hits"].as_array().unwrap().len(), 1, "{mode}: {v}");
        assert_eq!(v["complete"], false, "{mode}: {v}");
        assert_eq!(v["stopped"], "unserved_files", "{mode}: {v}");
        assert_eq!(
            v["stats"]["files_skipped"]["non_utf8_path"], 1,
            "{mode}: {v}"
        );
        let v = search(root, "needle a", mode, &[]);
        assert_eq!(v["complete"], true, "{mode}: {v}");
        let out = run(root, &["search", "needle", "--mode", mode]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a.txt:1:1:needle a\n");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("1 matching file(s) not shown"),
            "{mode}: {err}"
        );
    }
}

/// Human output quotes a name that could forge a hit line or steer the terminal (a newline, an
/// escape sequence), as git quotes names, in every output; JSON carries the name exactly. An
/// index never serves such a name (the trust gate refuses control characters): it counts it.
#[cfg(unix)]
#[test]
fn names_with_control_characters_are_quoted_and_never_forge_a_line() {
    let dir = repo();
    let root = dir.path();
    write(
        root,
        "esc\u{1b}]0;pwned\u{7}.txt",
        "needle one\nafter one\n",
    );
    write(root, "x\nforged.rs:1:1:needle", "needle two\n");
    let esc = r#""esc\033]0;pwned\a.txt""#;
    let forged = r#""x\nforged.rs:1:1:needle""#;
    let human = |mode: &str, extra: &[&str]| {
        let mut args = vec!["search", "needle", "--mode", mode];
        args.extend_from_slice(extra);
        String::from_utf8(run(root, &args).stdout).unwrap()
    };
    assert_eq!(
        human("literal", &[]),
        format!("{esc}:1:1:needle one\n{forged}:1:1:needle two\n")
    );
    assert_eq!(human("literal", &["-l"]), format!("{esc}\n{forged}\n"));
    assert_eq!(human("literal", &["-c"]), format!("{esc}:1\n{forged}:1\n"));
    assert_eq!(
        human("literal", &["-A", "1"]),
        format!("{esc}:1:1:needle one\n{esc}-2-after one\n--\n{forged}:1:1:needle two\n")
    );
    let v = search(root, "needle", "literal", &[]);
    assert_eq!(
        first_per_file(&v).into_keys().collect::<Vec<_>>(),
        ["esc\u{1b}]0;pwned\u{7}.txt", "x\nforged.rs:1:1:needle"]
    );
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(human("indexed_literal", &[]), "");
    let v = search(root, "needle", "indexed_literal", &[]);
    assert_eq!(v["stats"]["files_skipped"]["refused_path"], 2, "{v}");
    assert_eq!(v["stopped"], "unserved_files", "{v}");
}

/// `repo-search model status` on an empty model directory: MiniLM not installed, the built-in
/// static model in use; with a static model of its own in the directory, that one.
#[test]
fn model_status_says_what_semantic_uses() {
    let dir = tempfile::tempdir().unwrap();
    let status = |json: bool| {
        let mut c = Command::new(BIN);
        c.args(["model", "status", "--model-dir"]).arg(dir.path());
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let v: Value = serde_json::from_str(&status(true)).unwrap();
    assert_eq!(v["minilm_installed"], false, "{v}");
    assert_eq!(v["static_model"], "built-in", "{v}");
    assert_eq!(v["builtin_sha256"].as_str().map(str::len), Some(64), "{v}");
    assert!(status(false).contains("not installed (`repo-search model install`)"));
    std::fs::write(dir.path().join("static-256.bin"), b"mine").unwrap();
    let v: Value = serde_json::from_str(&status(true)).unwrap();
    assert_eq!(v["static_model"], "static-256.bin", "{v}");
    // Removing from a directory `install` never wrote to removes nothing of the user's.
    let out = Command::new(BIN)
        .args(["model", "remove", "--model-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(dir.path().join("static-256.bin").is_file());
}
