//! `cargo xtask corpus linux`: the Linux kernel tree from Debian's `linux-source-6.12`, prepared
//! under `target/corpus/linux` so that it reads like an upstream git worktree.
//!
//! `cargo xtask corpus linux --copies N`: N copies of that tree side by side (`copy-0/` …) as
//! one repository under `target/corpus/linux-xN`, a monorepo N times Linux's size: for ten
//! copies about 862 000 files and 15 GB, so it checks for 3.5 GB of free disk a copy first
//! (the copies, and the indexes the benchmark builds of them).
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
    let copies = match args.get(1..) {
        Some([flag, n]) if flag == "--copies" => Some(
            n.parse::<u32>()
                .ok()
                .filter(|&n| (1..=100).contains(&n))
                .ok_or_else(|| format!("--copies takes a count from 1 to 100, not {n:?}"))?,
        ),
        Some([]) | None => None,
        Some(_) => return Err(USAGE.into()),
    };
    let ready = match (args.first().map(String::as_str), copies) {
        (Some("linux"), None) => linux()?,
        (Some("linux"), Some(n)) => linux_copies(n)?,
        (Some("tokio"), None) => tokio()?,
        _ => return Err(USAGE.into()),
    };
    eprintln!("corpus ready: {}", ready.display());
    Ok(())
}

const USAGE: &str = "usage: cargo xtask corpus linux [--copies N] | tokio";

/// Free disk a copy of Linux needs: the 1.5 GB tree, and the indexes `cargo xtask bench` builds
/// of it (codesearch's, two of ours), with room to spare.
pub(crate) const BYTES_PER_COPY: u64 = 3_500_000_000;

/// The file that marks a corpus directory as completely prepared.
pub(crate) const READY: &str = ".repo-search-corpus-ready";

/// The name of the corpus of `n` copies of Linux (`linux-x10`), as `bench --corpus` takes it.
pub(crate) fn copies_name(n: u32) -> String {
    format!("linux-x{n}")
}

/// Prepares `n` copies of the Linux corpus as one repository once; later calls return at once.
pub(crate) fn linux_copies(n: u32) -> Result<PathBuf, String> {
    let dir = root().join("target").join("corpus").join(copies_name(n));
    let done = dir.join(READY);
    if done.exists() {
        return Ok(dir);
    }
    let source = linux()?;
    let parent = dir.parent().ok_or("corpus dir has no parent")?;
    let free = free_bytes(parent)?;
    let need = BYTES_PER_COPY * u64::from(n);
    if free < need {
        return Err(format!(
            "{n} copies of Linux need about {} GB of free disk (the copies and their indexes); \
             {} has {} GB free",
            need / 1_000_000_000,
            parent.display(),
            free / 1_000_000_000
        ));
    }
    eprintln!(
        "copying Linux {n} times into {} (about {} GB; {} GB free)",
        dir.display(),
        n as u64 * 3 / 2,
        free / 1_000_000_000
    );
    let _ = std::fs::remove_dir_all(&dir);
    for k in 0..n {
        let copy = dir.join(format!("copy-{k}"));
        std::fs::create_dir_all(&copy).map_err(|e| e.to_string())?;
        // The tree without its repository and marker: each copy is a directory of the one
        // repository made below, whose .gitignore files apply beneath it as a subproject's do.
        run(Command::new("sh").arg("-c").arg(format!(
            "tar -C '{}' --exclude=./.git --exclude=./{READY} -cf - . | tar -C '{}' -xf -",
            source.display(),
            copy.display()
        )))?;
    }
    // A repository, so ignore rules apply, but no commit: hashing 15 GB into git objects would
    // double the disk and take longer than the benchmark, and nothing here reads git's history.
    run(Command::new("git").args(["init", "-q"]).current_dir(&dir))?;
    std::fs::write(&done, b"").map_err(|e| e.to_string())?;
    Ok(dir)
}

/// Bytes free for an unprivileged user on the file system holding `dir` (POSIX `df -P`).
fn free_bytes(dir: &Path) -> Result<u64, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let out = Command::new("df")
        .arg("-Pk")
        .arg(dir)
        .output()
        .map_err(|e| format!("df: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| format!("df printed no free space for {}: {text}", dir.display()))
}

/// Prepares the corpus once; later calls return at once.
pub(crate) fn linux() -> Result<PathBuf, String> {
    let dir = linux_dir();
    let done = dir.join(READY);
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
    let done = dir.join(READY);
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
