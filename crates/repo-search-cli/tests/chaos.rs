//! The chaos suite: many processes on one worktree, kills mid-write, damaged index files, and
//! every repository shape git's view misses. After every step, every answer equals `literal`'s
//! (first match per file) or is an explicit error code; a failed call is a failure.
//!
//! Bounded: about a minute. `cargo xtask chaos --minutes N` runs the same steps for longer.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;

use support::{BIN, LIMIT, git, repo, run_bounded, write};

/// Path → (line, column) of each file's first match.
type FirstMatches = BTreeMap<String, (u64, u64)>;

/// The answer of one mode as path → (line, column) of the first match per file, or the error
/// code.
fn answer(root: &Path, query: &str, mode: &str) -> Result<(FirstMatches, Value), String> {
    let out = run_bounded(
        root,
        &[
            "search",
            query,
            "--json",
            "--mode",
            mode,
            "--max-results",
            "1000",
        ],
        LIMIT,
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    match out.status.code() {
        Some(0 | 1) => {
            let mut m = BTreeMap::new();
            for h in v["hits"].as_array().unwrap() {
                m.entry(h["path"].as_str().unwrap().to_owned())
                    .or_insert((h["line"].as_u64().unwrap(), h["column"].as_u64().unwrap()));
            }
            Ok((m, v))
        }
        _ => Err(format!(
            "{} ({})",
            v["code"],
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// The indexed answer must equal the literal one, file for file.
fn check_equal(root: &Path, query: &str) {
    let (literal, _) = answer(root, query, "literal").unwrap();
    let (indexed, v) = answer(root, query, "indexed_literal").unwrap();
    assert_eq!(indexed, literal, "{query}: {v}");
    assert_eq!(v["complete"], true, "{v}");
}

#[test]
fn parallel_processes_on_one_worktree_never_fail() {
    let dir = support::committed_tree();
    let root = dir.path().to_path_buf();
    let calls = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let longest = std::sync::Mutex::new(Duration::ZERO);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        // An editor, changing files while the queries run.
        s.spawn(|| support::edit_until(&root, &stop));
        let workers: Vec<_> = (0..6)
            .map(|w| {
                let (root, calls, failures, longest) = (&root, &calls, &failures, &longest);
                s.spawn(move || {
                    for round in 0..6 {
                        let args: Vec<&str> = if w == 0 && round % 2 == 0 {
                            vec!["index"]
                        } else {
                            vec!["search", "needle_0", "--json"]
                        };
                        let started = Instant::now();
                        let out = run_bounded(root, &args, LIMIT);
                        let took = started.elapsed();
                        calls.fetch_add(1, Ordering::Relaxed);
                        let mut l = longest.lock().unwrap();
                        *l = (*l).max(took);
                        if out.status.code() != Some(0) {
                            failures.lock().unwrap().push(format!(
                                "{args:?}: {:?} {} {}",
                                out.status.code(),
                                String::from_utf8_lossy(&out.stdout),
                                String::from_utf8_lossy(&out.stderr)
                            ));
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let failures = failures.into_inner().unwrap();
    eprintln!(
        "chaos: {} calls, {} failures, longest {:?}",
        calls.load(Ordering::Relaxed),
        failures.len(),
        longest.into_inner().unwrap()
    );
    assert!(failures.is_empty(), "{failures:#?}");
    // Once quiet, the answers agree.
    check_equal(&root, "needle_0");
    check_equal(&root, "fn g");
}

#[test]
fn kill_9_mid_index_never_breaks_later_queries() {
    let dir = repo();
    let root = dir.path();
    for i in 0..400 {
        write(
            root,
            &format!("d{}/f{i}.txt", i % 13),
            &format!("line {i}\nneedle {}\n", i % 3),
        );
    }
    for delay_ms in [1u64, 5, 12, 25, 50, 90, 150] {
        let mut child = Command::new(BIN)
            .current_dir(root)
            .arg("index")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        write(root, &format!("d0/edit{delay_ms}.txt"), "needle 1 edited\n");
        check_equal(root, "needle 1");
    }
}

#[test]
fn repository_shapes_git_status_misses_stay_fresh() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "needle in a\n");
    write(root, "skip.txt", "needle skip v1\n");
    write(root, "assume.txt", "needle assume v1\n");
    write(root, ".gitignore", "gen/\n");
    write(root, "gen/keep.txt", "needle generated\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "one"]);
    // An untracked nested repository, as a submodule's checkout also is.
    let nested = root.join("nested");
    std::fs::create_dir_all(&nested).unwrap();
    git(&nested, &["init", "-q"]);
    write(root, "nested/inner.txt", "needle nested v1\n");
    check_equal(root, "needle");

    // Edits git status does not list.
    git(root, &["update-index", "--skip-worktree", "skip.txt"]);
    git(root, &["update-index", "--assume-unchanged", "assume.txt"]);
    std::thread::sleep(Duration::from_millis(20));
    write(root, "skip.txt", "needle skip v2 changed\n");
    write(root, "assume.txt", "needle assume v2 changed\n");
    write(root, "nested/inner.txt", "x\nneedle nested v2 changed\n");
    check_equal(root, "changed");
    // `.ignore` re-includes what `.gitignore` excludes.
    write(root, ".ignore", "!gen/\n");
    check_equal(root, "needle generated");
    // An ignore file in a parent of the root, added after the index was built, is not read
    // outside a repository, so the answer must simply still agree.
    write(root, "a.txt", "needle in a, now with a much longer line\n");
    check_equal(root, "needle");
    // A line longer than the searcher's 4 MiB heap limit is still found.
    let mut long = "x".repeat(5 << 20);
    long.push_str(" needle_in_a_long_line\n");
    write(root, "long.txt", &long);
    check_equal(root, "needle_in_a_long_line");
}

#[test]
fn a_directory_that_becomes_a_symlink_never_leaks_outside_files() {
    let dir = repo();
    let root = dir.path();
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "a.txt", "needle SECRET_OUTSIDE\n");
    write(root, "sub/a.txt", "needle inside\n");
    check_equal(root, "needle");
    std::fs::remove_dir_all(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("sub")).unwrap();
    for mode in ["literal", "indexed_literal"] {
        let (hits, v) = answer(root, "SECRET_OUTSIDE", mode).unwrap();
        assert!(hits.is_empty(), "{mode}: {v}");
    }
    check_equal(root, "needle");
}

#[test]
fn a_name_the_gate_refuses_makes_the_answer_incomplete_not_failed() {
    let dir = repo();
    let root = dir.path();
    write(root, "plain.txt", "needle plain\n");
    write(
        root,
        "說明\u{202E}txt.md",
        "needle hidden behind a bidi override\n",
    );
    write(root, "说明：安装.md", "needle cjk\n");
    let (hits, v) = answer(root, "needle", "indexed_literal").unwrap();
    assert_eq!(
        hits.keys().collect::<Vec<_>>(),
        ["plain.txt", "说明：安装.md"],
        "{v}"
    );
    assert_eq!(v["complete"], false, "{v}");
    assert_eq!(v["stopped"], "unserved_files", "{v}");
    assert_eq!(v["stats"]["files_skipped"]["refused_path"], 1, "{v}");
    // A query the refused file does not match is complete.
    check_equal(root, "needle plain");
}

#[test]
fn damaged_index_files_are_rebuilt_or_refused_never_hang() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "needle a\n");
    write(root, "b.txt", "needle b\n");
    let index = root.join(".git/repo-search");
    type Damage = fn(&Path);
    let damages: [(&str, Damage); 5] = [
        ("fifo manifest", |d| {
            std::fs::remove_file(d.join("MANIFEST")).unwrap();
            mkfifo(&d.join("MANIFEST"));
        }),
        ("fifo lock", |d| {
            std::fs::remove_file(d.join("LOCK")).unwrap();
            mkfifo(&d.join("LOCK"));
        }),
        ("symlinked segment", |d| {
            let seg = segment(d);
            std::fs::remove_file(&seg).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", &seg).unwrap();
        }),
        ("flipped byte", |d| {
            let seg = segment(d);
            let mut b = std::fs::read(&seg).unwrap();
            let mid = b.len() / 2;
            b[mid] ^= 0x40;
            std::fs::write(&seg, b).unwrap();
        }),
        ("truncated manifest", |d| {
            let m = std::fs::read(d.join("MANIFEST")).unwrap();
            std::fs::write(d.join("MANIFEST"), &m[..m.len() / 2]).unwrap();
        }),
    ];
    for (what, damage) in damages {
        check_equal(root, "needle");
        damage(&index);
        let (indexed, v) =
            answer(root, "needle", "indexed_literal").unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(indexed.len(), 2, "{what}: {v}");
        // Leave a usable directory for the next damage.
        for name in ["MANIFEST", "LOCK"] {
            let p = index.join(name);
            if std::fs::symlink_metadata(&p).is_ok_and(|m| !m.is_file()) {
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
    assert!(ok, "mkfifo");
}

fn segment(d: &Path) -> std::path::PathBuf {
    std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "idx"))
        .unwrap()
}

#[test]
fn submodule_edits_and_parent_ignore_files_stay_fresh() {
    let outer = tempfile::tempdir().unwrap();
    let upstream = outer.path().join("upstream");
    std::fs::create_dir(&upstream).unwrap();
    git(&upstream, &["init", "-q", "-b", "main"]);
    write(&upstream, "lib.txt", "needle in the submodule v1\n");
    git(&upstream, &["add", "."]);
    git(
        &upstream,
        &[
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "u",
        ],
    );
    let root = outer.path().join("work");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    write(&root, "top.txt", "needle at the top\n");
    write(&root, "secret.txt", "needle secret\n");
    git(
        &root,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            upstream.to_str().unwrap(),
            "sub",
        ],
    );
    check_equal(&root, "needle");
    // An edit inside the submodule, then a commit inside it: the superproject's `git status`
    // shows at most "sub (new commits)", never which file changed.
    write(
        &root,
        "sub/lib.txt",
        "x\nneedle in the submodule v2 edited\n",
    );
    check_equal(&root, "edited");
    git(
        &root.join("sub"),
        &[
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "user.name=t",
            "commit",
            "-qam",
            "v2",
        ],
    );
    write(
        &root,
        "sub/lib.txt",
        "needle in the submodule v3 committed\n",
    );
    check_equal(&root, "committed");
    // An `.ignore` file in a parent of the root, added after the index was built, changes the
    // selection (ripgrep reads `.ignore` files of every parent).
    write(outer.path(), ".ignore", "secret.txt\n");
    check_equal(&root, "needle");
    let (hits, _) = answer(&root, "needle secret", "indexed_literal").unwrap();
    assert!(hits.is_empty(), "{hits:?}");
}

/// Agents call tools in parallel: processes asking `semantic` while files change must never fail.
/// Each process catches the shared store up to its own view of the trigram index, so one can
/// commit an older view between another's catch-up and its query; that query must catch up again
/// rather than answer `ERR_PRISM_INDEX_STALE`. `index` keeps MiniLM's vectors of the small tree,
/// so every answer is re-ranked, and each process embeds the edited chunks and appends them to
/// the shared log; an MCP server beside them keeps vectors in the background as well.
#[test]
fn parallel_semantic_processes_with_edits_never_fail() {
    use std::sync::atomic::AtomicBool;
    let dir = support::committed_tree();
    let root = dir.path().to_path_buf();
    let model = support::model_dir();
    let stop = AtomicBool::new(false);
    let failures = std::sync::Mutex::new(Vec::new());
    // The first build, alone: the race is between catch-ups, not first builds.
    let cache = tempfile::tempdir().unwrap();
    let command = |model: &Path, cache: &Path| {
        let mut c = Command::new(support::BIN);
        c.env("REPO_SEARCH_MODEL_DIR", model)
            .env("XDG_CACHE_HOME", cache)
            .env("HOME", cache);
        c
    };
    let first = command(&model, cache.path())
        .args(["index", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(first.status.success(), "{first:?}");
    std::thread::scope(|s| {
        s.spawn(|| support::edit_until(&root, &stop));
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let (root, model, failures, cache) = (&root, &model, &failures, cache.path());
                let command = &command;
                s.spawn(move || {
                    for round in 0..8 {
                        let query = ["a function that returns a needle", "module code"][round % 2];
                        let mut cmd = command(model, cache);
                        cmd.args(["search", "--mode", "semantic", "--json", "--root"])
                            .arg(root)
                            .arg(query);
                        let out = support::output_bounded(cmd, LIMIT);
                        if !out.status.success() {
                            failures.lock().unwrap().push(format!(
                                "worker {w} round {round}: {:?} {} {}",
                                out.status.code(),
                                String::from_utf8_lossy(&out.stdout),
                                String::from_utf8_lossy(&out.stderr)
                            ));
                        }
                    }
                })
            })
            .collect();
        let server = s.spawn(|| {
            let mut c = command(&model, cache.path());
            c.args(["mcp", "--root"]).arg(&root);
            let mut server = support::McpServer::spawn_command(&mut c).handshake();
            for round in 0..8 {
                let query = ["a function that returns a needle", "module code"][round % 2];
                let result = server.call(serde_json::json!({ "query": query, "mode": "semantic" }));
                if result["isError"] != false {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("server round {round}: {result}"));
                }
            }
        });
        for w in workers {
            w.join().unwrap();
        }
        server.join().unwrap();
        stop.store(true, Ordering::Relaxed);
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
}
