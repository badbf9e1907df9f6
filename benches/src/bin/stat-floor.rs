//! The kernel's floor under a one-shot search: `stat-floor ROOT` lists every directory beneath
//! `ROOT` (skipping `.git`) and `stat`s every regular file in it, relative to its directory, on
//! every core, and does nothing else: no index, no ignore rules, no query. A process that must
//! prove every file of a tree unchanged, as a one-shot `repo-search search` does, cannot take
//! less. Prints one JSON object: the files seen, and the medians of 11 timed rounds (after one
//! warm-up) of the listing alone and of the listing with the `stat`s.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// Directories waiting to be listed, and how many workers are listing one now.
struct Work {
    dirs: Vec<PathBuf>,
    busy: usize,
}

/// Lists the tree under `root` on `threads` threads, `stat`ing each regular file when `stat` is
/// set; returns the regular files seen.
fn walk(root: &Path, threads: usize, stat: bool) -> usize {
    let work = Mutex::new(Work {
        dirs: vec![root.to_path_buf()],
        busy: 0,
    });
    let ready = Condvar::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut files = 0usize;
                    loop {
                        let dir = {
                            let mut w = work.lock().unwrap();
                            loop {
                                if let Some(d) = w.dirs.pop() {
                                    w.busy += 1;
                                    break Some(d);
                                }
                                if w.busy == 0 {
                                    break None;
                                }
                                w = ready.wait(w).unwrap();
                            }
                        };
                        let Some(dir) = dir else {
                            ready.notify_all();
                            return files;
                        };
                        let mut found = Vec::new();
                        if let Ok(entries) = std::fs::read_dir(&dir) {
                            for entry in entries.flatten() {
                                let Ok(kind) = entry.file_type() else {
                                    continue;
                                };
                                if kind.is_dir() && entry.file_name() != ".git" {
                                    found.push(entry.path());
                                } else if kind.is_file() {
                                    files += 1;
                                    // `DirEntry::metadata` is an `fstatat` relative to the
                                    // directory's descriptor, without following a symlink.
                                    if stat {
                                        std::hint::black_box(entry.metadata().ok());
                                    }
                                }
                            }
                        }
                        let mut w = work.lock().unwrap();
                        w.dirs.extend(found);
                        w.busy -= 1;
                        drop(w);
                        ready.notify_all();
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

fn median_ms(root: &Path, threads: usize, stat: bool) -> f64 {
    walk(root, threads, stat);
    let mut times: Vec<f64> = (0..11)
        .map(|_| {
            let t = Instant::now();
            walk(root, threads, stat);
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let root = PathBuf::from(std::env::args().nth(1).expect("usage: stat-floor ROOT"));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let files = walk(&root, threads, false);
    let list_ms = median_ms(&root, threads, false);
    let list_stat_ms = median_ms(&root, threads, true);
    println!(
        "{{\"files\":{files},\"threads\":{threads},\"list_ms\":{list_ms},\"list_stat_ms\":{list_stat_ms}}}"
    );
}
