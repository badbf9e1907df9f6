//! `repo-search --backend postgres://…` against a real server.
//!
//! A `harness = false` test, as `pg-index`'s: run without `PGHOST` it re-runs itself under
//! `pg_virtualenv -t`, which creates a throwaway cluster and exports the `PG*` variables. It never
//! skips: without PostgreSQL it fails. The binary is run with every `PG*` variable removed, so the
//! URL alone names the server and carries the password; each case uses a tenant of its own. A
//! name given on the command line runs only the cases whose name contains it.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::{BIN, git, repo, write};

const CASES: &[(&str, fn())] = &[
    (
        "index_then_search_equals_rg_first_match_per_file",
        index_then_search_equals_rg_first_match_per_file,
    ),
    (
        "a_write_in_the_worktree_is_pushed_before_the_next_search",
        a_write_in_the_worktree_is_pushed_before_the_next_search,
    ),
    (
        "read_only_serves_the_attested_revision_and_never_writes",
        read_only_serves_the_attested_revision_and_never_writes,
    ),
    (
        "a_wrong_password_or_a_server_down_fails_without_echoing_credentials",
        a_wrong_password_or_a_server_down_fails_without_echoing_credentials,
    ),
    (
        "mcp_with_a_backend_answers_indexed_literal",
        mcp_with_a_backend_answers_indexed_literal,
    ),
    (
        "a_push_past_the_deadline_is_a_timeout_and_writes_nothing",
        a_push_past_the_deadline_is_a_timeout_and_writes_nothing,
    ),
];

fn main() {
    let filters = index_testkit::pg::in_throwaway_cluster();
    let (mut passed, mut failed) = (0, 0);
    for &(name, case) in CASES {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        if std::panic::catch_unwind(case).is_ok() {
            passed += 1;
            println!("test {name} ... ok");
        } else {
            failed += 1;
            println!("test {name} ... FAILED");
        }
    }
    println!("pg: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("pg_virtualenv did not export {name}"))
}

/// The server as a URL with its password, or with `password` instead.
fn url_with(password: &str, port: &str) -> String {
    let host = std::env::var("PGHOST")
        .ok()
        .filter(|h| !h.starts_with('/'))
        .unwrap_or_else(|| "localhost".to_owned());
    format!(
        "postgresql://{}:{password}@{host}:{port}/{}",
        env("PGUSER"),
        env("PGDATABASE")
    )
}

fn url() -> String {
    url_with(&env("PGPASSWORD"), &env("PGPORT"))
}

/// Runs the binary in `root` with no `PG*` variable: only the URL names the server.
fn run(root: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(root).args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            cmd.env_remove(k);
        }
    }
    cmd.env_remove("REPO_SEARCH_BACKEND");
    cmd.output().expect("run repo-search")
}

/// `search --json` on the shared index, as tenant `tenant`, with `extra` arguments.
fn search(root: &Path, tenant: &str, query: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let url = url();
    let mut args = vec![
        "search",
        query,
        "--json",
        "--max-results",
        "1000",
        "--backend",
        &url,
        "--tenant",
        tenant,
    ];
    args.extend_from_slice(extra);
    let out = run(root, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(&text).unwrap_or_else(|_| {
        panic!(
            "not JSON: {text} / {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

fn first_per_file(v: &Value) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for h in v["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits: {v}"))
    {
        m.entry(h["path"].as_str().unwrap().to_owned())
            .or_insert((h["line"].as_u64().unwrap(), h["column"].as_u64().unwrap()));
    }
    m
}

fn rg_first_per_file(root: &Path, query: &str, ci: bool) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for (path, line, col) in index_testkit::rg::rg_hits(root, query, ci, None) {
        let e = m.entry(path).or_insert((line, col));
        *e = (*e).min((line, col));
    }
    m
}

/// `psql` as the cluster's admin: one value per row, `|` between columns.
fn psql(sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-XAtc", sql])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Everything the shared index holds for `tenant`: a change anywhere changes this text.
fn snapshot(tenant: &str) -> String {
    psql(&format!(
        "SELECT (SELECT count(*) FROM repo_search.files WHERE tenant_id = '{tenant}'),
                (SELECT string_agg(md5(path || coalesce(encode(stamp, 'hex'), '') || content), ',' ORDER BY path)
                   FROM repo_search.files WHERE tenant_id = '{tenant}'),
                (SELECT string_agg(repo_id || state || coalesce(source_revision, '') || updated_at::text, ',')
                   FROM repo_search.repos WHERE tenant_id = '{tenant}')"
    ))
}

fn a_tree() -> tempfile::TempDir {
    let dir = repo();
    let root = dir.path();
    write(root, "src/a.rs", "fn alpha() { needle(); }\nneedle again\n");
    write(root, "src/b.rs", "fn beta() {}\n// a Needle and a needle\n");
    write(root, "docs/c.md", "NEEDLE in docs\n");
    write(root, "caf\u{e9}.txt", "caf\u{e9} needle \u{e9}\n");
    write(root, ".gitignore", "target/\n");
    write(root, "target/out.rs", "needle in ignored output\n");
    write(root, ".hidden/h.rs", "needle hidden\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    dir
}

fn index_then_search_equals_rg_first_match_per_file() {
    let dir = a_tree();
    let root = dir.path();
    let url = url();
    let out = run(root, &["index", "--backend", &url, "--tenant", "cli-eq"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (query, ci) in [
        ("needle", false),
        ("needle", true),
        ("fn ", false),
        ("é", true),
    ] {
        let extra: &[&str] = if ci { &["-i"] } else { &[] };
        let (code, v) = search(root, "cli-eq", query, extra);
        assert!(code.is_some_and(|c| c <= 1), "{v}");
        assert_eq!(v["indexed"]["state"], "ready", "{v}");
        assert_eq!(
            first_per_file(&v),
            rg_first_per_file(root, query, ci),
            "{query:?} ci={ci}"
        );
    }
    let status = run(
        root,
        &["status", "--json", "--backend", &url, "--tenant", "cli-eq"],
    );
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["files"], 4, "{status}");
    assert_eq!(status["backend"], "postgres");
}

fn a_write_in_the_worktree_is_pushed_before_the_next_search() {
    let dir = a_tree();
    let root = dir.path();
    let (_, first) = search(root, "cli-push", "needle", &[]);
    let rev1 = first["indexed"]["source_revision"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(first_per_file(&first).contains_key("src/a.rs"));
    // An edit, a new file and a deletion, none committed: the next search sees all three.
    write(root, "src/a.rs", "fn alpha() {}\n\n\nnew needle line\n");
    write(root, "src/new.rs", "a needle in a new file\n");
    std::fs::remove_file(root.join("src/b.rs")).unwrap();
    let (_, second) = search(root, "cli-push", "needle", &[]);
    let got = first_per_file(&second);
    assert_eq!(got, rg_first_per_file(root, "needle", false));
    assert_eq!(got.get("src/a.rs"), Some(&(4, 5)));
    assert!(got.contains_key("src/new.rs") && !got.contains_key("src/b.rs"));
    let rev2 = second["indexed"]["source_revision"].as_str().unwrap();
    assert_ne!(rev1, rev2, "new content, the same revision");
    // The rows are the selection, exactly.
    assert_eq!(
        psql(
            "SELECT string_agg(path, ',' ORDER BY path) FROM repo_search.files WHERE tenant_id = 'cli-push'"
        ),
        "café.txt,docs/c.md,src/a.rs,src/new.rs"
    );
    // A query that changes nothing writes no file row.
    let before = psql(
        "SELECT count(*), sum(xmin::text::bigint) FROM repo_search.files WHERE tenant_id = 'cli-push'",
    );
    search(root, "cli-push", "needle", &[]);
    let after = psql(
        "SELECT count(*), sum(xmin::text::bigint) FROM repo_search.files WHERE tenant_id = 'cli-push'",
    );
    assert_eq!(before, after);
}

fn read_only_serves_the_attested_revision_and_never_writes() {
    let dir = a_tree();
    let root = dir.path();
    let url = url();
    let out = run(root, &["index", "--backend", &url, "--tenant", "cli-ro"]);
    assert!(out.status.success());
    let pushed = snapshot("cli-ro");
    let old_head = String::from_utf8(
        Command::new("git")
            .current_dir(root)
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_owned();
    // An uncommitted edit: the reader serves what the index attests for HEAD, and never pushes.
    write(root, "src/a.rs", "fn alpha() {}\nneedle_only_local\n");
    let (code, v) = search(root, "cli-ro", "needle", &["--read-only"]);
    assert_eq!(code, Some(0), "{v}");
    assert!(first_per_file(&v).contains_key("src/b.rs"), "{v}");
    let (code, v) = search(root, "cli-ro", "needle_only_local", &["--read-only"]);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(snapshot("cli-ro"), pushed, "a read-only search wrote");
    // `index` under --read-only is refused before anything is sent.
    let out = run(
        root,
        &[
            "index",
            "--backend",
            &url,
            "--tenant",
            "cli-ro",
            "--read-only",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(snapshot("cli-ro"), pushed, "a read-only index wrote");
    // A new commit: the index does not attest it, so nothing is served.
    git(root, &["commit", "-qam", "two"]);
    let (code, v) = search(root, "cli-ro", "needle", &["--read-only"]);
    assert_eq!(code, Some(2), "{v}");
    assert_eq!(v["code"], "ERR_PRISM_INDEX_STALE", "{v}");
    // Pinned to the commit the index does attest, it serves again.
    let (code, v) = search(
        root,
        "cli-ro",
        "needle",
        &["--read-only", "--revision", &old_head],
    );
    assert_eq!(code, Some(0), "{v}");
    // A repository nobody pushed is not served either.
    let (code, v) = search(
        root,
        "cli-ro",
        "needle",
        &["--read-only", "--repo-id", "never-pushed"],
    );
    assert_eq!(
        (code, v["code"].as_str()),
        (Some(2), Some("ERR_PRISM_INDEX_STALE")),
        "{v}"
    );
    assert_eq!(snapshot("cli-ro"), pushed, "a read-only search wrote");
}

fn a_wrong_password_or_a_server_down_fails_without_echoing_credentials() {
    let dir = a_tree();
    let root = dir.path();
    let free_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let secret = "pw-Secret-4711";
    let cases = [
        url_with(secret, &env("PGPORT")),
        url_with(secret, &free_port),
        format!("postgres://u:{secret}@[not a host"),
    ];
    for (i, url) in cases.iter().enumerate() {
        for args in [
            vec!["search", "needle", "--json", "--backend", url],
            vec!["status", "--json", "--backend", url],
            vec!["index", "--backend", url],
        ] {
            let started = std::time::Instant::now();
            let out = run(root, &args);
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{args:?} took too long"
            );
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            // The user as the URL spells it (the hint's own `postgres://user@…` is no leak).
            let user = format!("//{}", env("PGUSER"));
            for leak in [secret, user.as_str(), "not a host", "@localhost", "[not"] {
                assert!(!text.contains(leak), "{args:?} echoed {leak:?}: {text}");
            }
            let code = if i == 2 {
                "ERR_PRISM_INDEX_UNSUPPORTED"
            } else {
                "ERR_PRISM_INDEX_FAILED"
            };
            assert!(text.contains(code), "{args:?}: {text}");
        }
    }
    // A working URL with its password is not echoed either.
    let good = url();
    let out = run(
        root,
        &[
            "search",
            "needle",
            "--backend",
            &good,
            "--tenant",
            "cli-leak",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(&env("PGPASSWORD")) && !text.contains("@localhost"));
}

fn mcp_with_a_backend_answers_indexed_literal() {
    let dir = a_tree();
    let root = dir.path();
    let url = url();
    let mut cmd = Command::new(BIN);
    cmd.args(["mcp", "--backend", &url, "--tenant", "cli-mcp", "--root"])
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, replies) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                return;
            }
        }
    });
    let mut send = |v: Value| writeln!(stdin, "{v}").and_then(|()| stdin.flush()).unwrap();
    let reply = || {
        replies
            .recv_timeout(Duration::from_secs(60))
            .expect("no MCP reply within 60 s")
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": support::initialize_params()}),
    );
    assert_eq!(reply()["id"], 1);
    send(support::initialized_notification());
    let call = |id: u64, query: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": support::tool_call_params(json!({"query": query, "mode": "indexed_literal"}))})
    };
    send(call(2, "needle"));
    let r = reply();
    let result = &r["result"]["structuredContent"];
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(result["indexed"]["state"], "ready", "{r}");
    assert_eq!(
        first_per_file(result),
        rg_first_per_file(root, "needle", false)
    );
    // The long-lived host pushes before each call too.
    write(root, "docs/c.md", "now a needle_from_mcp\n");
    send(call(3, "needle_from_mcp"));
    let r = reply();
    let paths: Vec<_> = r["result"]["structuredContent"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].clone())
        .collect();
    assert_eq!(paths, [json!("docs/c.md")], "{r}");
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}

/// Another writer holds the repository's row: the push before the query waits, gives up at the
/// 30 s query deadline with `TIMEOUT`, and leaves nothing of itself behind.
fn a_push_past_the_deadline_is_a_timeout_and_writes_nothing() {
    let dir = a_tree();
    let root = dir.path();
    let (code, _) = search(root, "cli-lock", "needle", &[]);
    assert_eq!(code, Some(0));
    let pushed = snapshot("cli-lock");
    let mut holder = Command::new("psql")
        .args(["-Xq"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("run psql");
    let mut stdin = holder.stdin.take().unwrap();
    writeln!(
        stdin,
        "BEGIN; SELECT 1 FROM repo_search.repos WHERE tenant_id = 'cli-lock' FOR UPDATE;"
    )
    .unwrap();
    stdin.flush().unwrap();
    let held = || {
        psql(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
               WHERE a.application_name = 'psql' AND l.locktype = 'transactionid'",
        )
    };
    let started = std::time::Instant::now();
    while held() == "0" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "psql never took the lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    write(root, "src/a.rs", "fn alpha() {}\nneedle_after_the_lock\n");
    let started = std::time::Instant::now();
    let (code, v) = search(root, "cli-lock", "needle_after_the_lock", &[]);
    let took = started.elapsed();
    assert_eq!(code, Some(2), "{v}");
    assert_eq!(v["code"], "ERR_PRISM_INDEX_TIMEOUT", "{v}");
    assert!(
        took >= Duration::from_secs(25) && took < Duration::from_secs(45),
        "the deadline was not honoured: {took:?}"
    );
    drop(stdin);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(snapshot("cli-lock"), pushed, "a push that timed out wrote");
    let (code, v) = search(root, "cli-lock", "needle_after_the_lock", &[]);
    assert_eq!(code, Some(0), "{v}");
}
