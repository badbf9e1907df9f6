//! `cargo xtask corpus linux`: the Linux kernel tree from Debian's `linux-source-6.12`, prepared
//! under `target/corpus/linux` so that it reads like an upstream git worktree.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{root, run};

const TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";

/// Where the prepared corpus lives.
pub(crate) fn linux_dir() -> PathBuf {
    root().join("target").join("corpus").join("linux")
}

pub(crate) fn corpus(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("linux") => linux().map(|p| eprintln!("corpus ready: {}", p.display())),
        _ => Err("usage: cargo xtask corpus linux".into()),
    }
}

/// Prepares the corpus once; later calls return at once.
pub(crate) fn linux() -> Result<PathBuf, String> {
    let dir = linux_dir();
    let done = dir.join(".repo-search-corpus-ready");
    if done.exists() {
        return Ok(dir);
    }
    if !Path::new(TARBALL).exists() {
        return Err(format!(
            "{TARBALL} is missing. Install Debian's kernel source first:\n    \
             apt-get update && apt-get install -y linux-source-6.12\n\
             (`dpkg -L linux-source-6.12` shows where the tarball lands)"
        ));
    }
    let parent = dir
        .parent()
        .ok_or("corpus dir has no parent")?
        .to_path_buf();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&parent).map_err(|e| e.to_string())?;
    let staging = parent.join("linux-staging");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| e.to_string())?;
    run(Command::new("tar")
        .arg("-xJf")
        .arg(TARBALL)
        .arg("-C")
        .arg(&staging))?;
    let extracted = std::fs::read_dir(&staging)
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .find(|e| e.path().is_dir())
        .ok_or("the tarball held no directory")?
        .path();
    std::fs::rename(&extracted, &dir).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&staging);
    // Debian appends `/*` and `!/debian/` to the top .gitignore (to track only its packaging);
    // drop them so the tree is selected the way upstream's is.
    let gitignore = dir.join(".gitignore");
    let text = std::fs::read_to_string(&gitignore).map_err(|e| e.to_string())?;
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !matches!(l.trim(), "/*" | "!/debian/"))
        .collect();
    std::fs::write(&gitignore, kept.join("\n") + "\n").map_err(|e| e.to_string())?;
    // A repository of its own, committed, as a kernel checkout is: .gitignore rules apply
    // (ripgrep and `ignore` require a git directory) and `git status` is clean.
    run(Command::new("git").args(["init", "-q"]).current_dir(&dir))?;
    run(Command::new("git").args(["add", "-A"]).current_dir(&dir))?;
    run(Command::new("git")
        .args([
            "-c",
            "user.name=corpus",
            "-c",
            "user.email=corpus@example.invalid",
            "commit",
            "-q",
            "-m",
            "Linux 6.12 from Debian's linux-source-6.12",
        ])
        .current_dir(&dir))?;
    std::fs::write(&done, b"").map_err(|e| e.to_string())?;
    Ok(dir)
}
