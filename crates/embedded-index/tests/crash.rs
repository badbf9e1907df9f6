//! Crash safety: a writer process is killed with SIGKILL at random points of its updates, many
//! times; every time, the index it leaves opens as a committed version, whole and correct.
//!
//! This is a `harness = false` test: run with `REPO_SEARCH_CRASH_WRITER=<root>:<store>` it is the
//! writer; otherwise it is the parent that starts and kills writers.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use embedded_index::EmbeddedIndex;
use index_contract::IndexState;

const ENV: &str = "REPO_SEARCH_CRASH_WRITER";

fn main() {
    if let Ok(spec) = std::env::var(ENV) {
        let (root, store) = spec.split_once('\n').expect("root and store");
        writer(Path::new(root), Path::new(store));
        return;
    }
    parent();
    println!("crash: 1 passed, 0 failed");
}

/// Version K holds files f{K-2}, f{K-1}, f{K} (those that exist), each containing "marker K".
fn writer(root: &Path, store: &Path) {
    let index = EmbeddedIndex::open(root, store).expect("open");
    let start = match index.current_status().source_revision {
        Some(r) => r.parse::<usize>().expect("revision") + 1,
        None => {
            index.build("0").expect("build");
            1
        }
    };
    for k in start.. {
        std::fs::write(root.join(format!("f{k}.txt")), format!("marker {k}\n")).expect("write");
        let removed = k.checked_sub(3).map(|r| format!("f{r}.txt"));
        if let Some(r) = &removed {
            let _ = std::fs::remove_file(root.join(r));
        }
        index
            .apply(
                &[format!("f{k}.txt")],
                removed.as_slice(),
                Some(&k.to_string()),
            )
            .expect("apply");
    }
}

fn parent() {
    let root = tempfile::tempdir().expect("root");
    let store = tempfile::tempdir().expect("store");
    std::fs::write(root.path().join("base.txt"), "base marker\n").expect("base");
    let exe = std::env::current_exe().expect("exe");
    let mut state: u64 = 0x9e3779b97f4a7c15;
    let mut last_rev = 0usize;
    let kills = 60;
    for round in 0..kills {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut child = Command::new(&exe)
            .env(
                ENV,
                format!("{}\n{}", root.path().display(), store.path().display()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn writer");
        std::thread::sleep(Duration::from_millis(5 + state % 60));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let index = EmbeddedIndex::open(root.path(), store.path()).expect("reopen");
        let status = index.current_status();
        assert_ne!(
            status.state,
            IndexState::Failed,
            "round {round}: a kill left a damaged index"
        );
        let Some(rev) = status.source_revision else {
            assert_eq!(
                status.state,
                IndexState::Empty,
                "round {round}: ready without a revision"
            );
            continue;
        };
        let k: usize = rev.parse().expect("revision");
        assert!(
            k >= last_rev,
            "round {round}: revision went back from {last_rev} to {k}"
        );
        last_rev = k;
        // The committed version holds exactly base.txt and f{k-2}..f{k}.
        let mut expected: BTreeSet<String> = (k.saturating_sub(2)..=k)
            .filter(|&i| i >= 1)
            .map(|i| format!("f{i}.txt"))
            .collect();
        expected.insert("base.txt".into());
        let got: BTreeSet<String> = index.indexed_paths().into_iter().collect();
        assert_eq!(
            got, expected,
            "round {round}: revision {k} does not hold its files"
        );
    }
    assert!(
        last_rev > 10,
        "the writer made too little progress ({last_rev}) to test anything"
    );
}
