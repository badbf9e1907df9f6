//! Starting a `repo-search serve` in the background after a search that no server answered.
//!
//! A search without a server proves every selected file unchanged with one `stat` each, which
//! costs tens of milliseconds on a large worktree and most of a second on a monorepo; through a
//! server that watches the worktree it costs a few milliseconds (`docs/benchmarks.md`). So a
//! search on a large index (`--start-server=large`, the default: at least
//! [`LARGE_INDEX_FILES`] files) starts one for the searches after it, as `git`'s scalar starts
//! its file-system monitor on large repositories. This search has already answered by itself;
//! it does not wait for the server.
//!
//! What the server leaves behind is bounded: it stops after [`IDLE_TIMEOUT_SECS`] without a
//! search, and as soon as its worktree or index directory goes away; one runs per index
//! directory (its lock), so searches that start one at once leave one. It leads a session of
//! its own (the search's terminal, its Ctrl-C and hang-up do not reach it), in `/`, with none of
//! the descriptors the search inherited; what it reports goes to `serve.log` in the index
//! directory.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::flags::{Location, StartServer};

/// The fewest files an index holds for `--start-server=large` to start a server: there a search
/// without one costs about 20 ms, most of it one `stat` a file.
pub(crate) const LARGE_INDEX_FILES: u64 = 20_000;

/// Whether a search that no server answered, on an embedded index of `files` files, starts a
/// server when `--start-server` says `when`.
pub(crate) fn wanted(when: StartServer, files: u64) -> bool {
    match when {
        StartServer::Never => false,
        StartServer::Large => files >= LARGE_INDEX_FILES,
        StartServer::Always => true,
    }
}

/// How long a started server waits for a search before it stops.
pub(crate) const IDLE_TIMEOUT_SECS: u64 = 15 * 60;

/// Starts `repo-search serve` for the worktree at `root` (its canonical root) and the index
/// directory `index_dir`, with this search's location flags, in the background, unless a server
/// holds the index directory's lock already (one serves, or is starting). Whether it could is
/// all this says: a server started at the same instant as another exits on the lock, which is
/// no failure.
pub(crate) fn start_server(
    location: &Location,
    root: &Path,
    index_dir: &Path,
) -> std::io::Result<()> {
    if repo_search_host::served::serving_pid(index_dir).is_some() {
        return Ok(());
    }
    let log = repo_search_host::served::open_log(index_dir)?;
    let mut serve = Command::new(std::env::current_exe()?);
    serve
        .args(serve_args(
            root,
            index_dir,
            location.semantic_config().model_dir.as_deref(),
        ))
        // It holds no directory of the caller's busy: every path it gets is absolute.
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    detach(&mut serve);
    // The server outlives this process on purpose: it is not waited for, and is inherited by
    // the system when this search exits, a moment later.
    drop(serve.spawn()?);
    Ok(())
}

/// Makes `serve` start in a session of its own, without the caller's terminal (its Ctrl-C and
/// hang-up do not reach it), and holding none of the descriptors the caller let this search
/// inherit besides its standard ones: a lock held through one (`flock 9`), a pipe a caller
/// waits on to close, or a `make` jobserver would otherwise stay held for as long as it runs.
fn detach(serve: &mut Command) {
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the child between `fork` and `exec`, where only
    // async-signal-safe calls are allowed: it makes two system calls, allocates nothing and
    // takes no lock. `CLOSE_RANGE_CLOEXEC` marks the descriptors to be closed by the `exec`
    // rather than closing them, so the pipe on which the standard library reports a failed
    // `exec` still works. A kernel without `close_range` (before 5.11) leaves them as they are.
    unsafe {
        serve.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
}

/// The arguments of the `serve` a search starts: the same worktree, index directory and model
/// directory (`model_dir`, as the search resolved it), as absolute paths, so that it serves this
/// search's index with the same models. Both directories are passed even when the search found
/// them by default: the server runs in `/`, where a relative `XDG_CACHE_HOME`, `HOME` or
/// `REPO_SEARCH_MODEL_DIR` names other directories, and it would serve (and build) an index this
/// search never asks about. The search's own `--rerank` and `--deadline-ms` are not passed on:
/// the server keeps them for every search it answers, and a search's own deadline and re-rank
/// are for itself (a search with another re-rank is not served by it, and answers by itself).
fn serve_args(root: &Path, index_dir: &Path, model_dir: Option<&Path>) -> Vec<OsString> {
    let absolute = |dir: &Path| std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut args: Vec<OsString> = vec!["serve".into(), "--root".into(), root.into()];
    args.extend(["--index-dir".into(), absolute(index_dir).into()]);
    if let Some(dir) = model_dir {
        args.extend(["--model-dir".into(), absolute(dir).into()]);
    }
    args.push(format!("--idle-timeout={IDLE_TIMEOUT_SECS}").into());
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;
    use std::path::PathBuf;

    /// The location flags of `search ARGS`, parsed as the binary parses them.
    fn location(args: &[&str]) -> Location {
        let cli =
            crate::flags::Cli::try_parse_from(["repo-search", "search", "q"].iter().chain(args))
                .expect("flags parse");
        match cli.command {
            crate::flags::Command::Search { location, .. } => location,
            _ => unreachable!("a search was parsed"),
        }
    }

    /// Checks the arguments of the server a search with `args` starts, whose model directory,
    /// when the flags name none, is `default_model_dir` (as a variable would give it).
    fn check(args: &[&str], default_model_dir: Option<&str>, expected: &[&str]) {
        let location = location(args);
        let model_dir = location
            .model_dir
            .clone()
            .or(default_model_dir.map(PathBuf::from));
        let got = serve_args(Path::new("/w"), Path::new("/i"), model_dir.as_deref());
        let got: Vec<String> = got
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(got, expected, "search {args:?}");
        let parsed =
            crate::flags::Cli::try_parse_from(std::iter::once("repo-search".to_owned()).chain(got));
        assert!(
            matches!(
                parsed.map(|c| c.command),
                Ok(crate::flags::Command::Serve {
                    idle_timeout: IDLE_TIMEOUT_SECS,
                    ..
                })
            ),
            "the started server's arguments parse as `serve`, with the idle timeout"
        );
    }

    #[test]
    fn large_means_twenty_thousand_files_or_more() {
        for (when, files, expected) in [
            (StartServer::Large, 0, false),
            (StartServer::Large, LARGE_INDEX_FILES - 1, false),
            (StartServer::Large, LARGE_INDEX_FILES, true),
            (StartServer::Never, u64::MAX, false),
            (StartServer::Always, 0, true),
        ] {
            assert_eq!(wanted(when, files), expected, "{when:?} {files}");
        }
    }

    /// A started server must parse as `serve` and serve this search's index with its models:
    /// were the index or model directory lost, the client would not be served by it. Both are
    /// passed as absolute paths, also when the search found them by default: the server runs in
    /// `/`, where a relative `REPO_SEARCH_MODEL_DIR` (or `XDG_CACHE_HOME`, `HOME`) names another
    /// directory. The search's re-rank and deadline stay the search's own.
    #[test]
    fn a_started_server_gets_the_searchs_index_and_model_directories() {
        let cwd = std::env::current_dir().unwrap();
        let abs = |p: &str| cwd.join(p).to_str().unwrap().to_owned();
        let serve = |model: &str| {
            [
                "serve",
                "--root",
                "/w",
                "--index-dir",
                "/i",
                "--model-dir",
                model,
                "--idle-timeout=900",
            ]
            .map(str::to_owned)
        };
        check(
            &[],
            None,
            &[
                "serve",
                "--root",
                "/w",
                "--index-dir",
                "/i",
                "--idle-timeout=900",
            ],
        );
        check(
            &[
                "--index-dir",
                "relative/i",
                "--model-dir",
                "m",
                "--rerank",
                "--deadline-ms",
                "5",
            ],
            Some("ignored/by/the/flag"),
            &serve(&abs("m")).each_ref().map(String::as_str),
        );
        check(
            &[],
            Some("cache/repo-search/models/all-minilm-l6-v2"),
            &serve(&abs("cache/repo-search/models/all-minilm-l6-v2"))
                .each_ref()
                .map(String::as_str),
        );
        check(
            &[],
            Some("/abs/m"),
            &serve("/abs/m").each_ref().map(String::as_str),
        );
    }
}
