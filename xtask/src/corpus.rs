//! `cargo xtask corpus linux`: the Linux kernel tree from Debian's `linux-source-6.12`, prepared
//! under `target/corpus/linux` so that it reads like an upstream git worktree.
//!
//! `cargo xtask corpus tokio`: the sources of the tokio crate this workspace locks, from cargo's
//! registry, as a repository of its own under `target/corpus/tokio`: a medium repository (about
//! 5 800 chunks) that every machine that builds the workspace has.

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
        Some("tokio") => tokio().map(|p| eprintln!("corpus ready: {}", p.display())),
        _ => Err("usage: cargo xtask corpus linux|tokio".into()),
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
    commit(&dir, "Linux 6.12 from Debian's linux-source-6.12")?;
    std::fs::write(&done, b"").map_err(|e| e.to_string())?;
    Ok(dir)
}

/// Makes `dir` a repository of its own with everything in it committed.
fn commit(dir: &Path, message: &str) -> Result<(), String> {
    run(Command::new("git").args(["init", "-q"]).current_dir(dir))?;
    run(Command::new("git").args(["add", "-A"]).current_dir(dir))?;
    run(Command::new("git")
        .args([
            "-c",
            "user.name=corpus",
            "-c",
            "user.email=corpus@example.invalid",
            "commit",
            "-q",
            "-m",
            message,
        ])
        .current_dir(dir))
}

/// The version of `package` that Cargo.lock pins.
fn locked_version(package: &str) -> Result<String, String> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).map_err(|e| e.to_string())?;
    let name = format!("name = \"{package}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name
            && let Some(version) = lines
                .next()
                .and_then(|v| v.trim().strip_prefix("version = "))
        {
            return Ok(version.trim_matches('"').to_owned());
        }
    }
    Err(format!("Cargo.lock pins no {package}"))
}

/// Prepares the tokio corpus once (`target/corpus/tokio`); later calls return at once.
pub(crate) fn tokio() -> Result<PathBuf, String> {
    let dir = root().join("target").join("corpus").join("tokio");
    let done = dir.join(".repo-search-corpus-ready");
    if done.exists() {
        return Ok(dir);
    }
    let version = locked_version("tokio")?;
    // The workspace depends on tokio: fetching puts its sources in cargo's registry.
    run(crate::cargo().args(["fetch", "--locked"]))?;
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let registries = cargo_home.join("registry").join("src");
    let source = std::fs::read_dir(&registries)
        .map_err(|e| format!("{}: {e}", registries.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path().join(format!("tokio-{version}")))
        .find(|p| p.join("Cargo.toml").is_file())
        .ok_or_else(|| format!("tokio-{version} is not in {}", registries.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.parent().ok_or("corpus dir has no parent")?)
        .map_err(|e| e.to_string())?;
    run(Command::new("cp").arg("-R").arg(&source).arg(&dir))?;
    commit(&dir, &format!("tokio {version} from cargo's registry"))?;
    std::fs::write(&done, b"").map_err(|e| e.to_string())?;
    Ok(dir)
}
