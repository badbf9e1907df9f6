//! `repo-search`: code search for a git worktree from the command line and over MCP.
//!
//! `repo-search search QUERY` brings the embedded index up to date with the worktree (a full
//! build on first use, an incremental update from git after that) and answers in
//! `indexed_literal` mode; `--mode literal` scans the worktree instead. `repo-search mcp` serves
//! the same `repo_search` tool to an agent over stdio. `repo-search serve` keeps a watching host
//! on a socket in the index directory; `search` asks it first when one runs, and never starts it.
//! With `--backend postgres://…` (or `REPO_SEARCH_BACKEND`) `search`, `index`, `status` and `mcp`
//! use a shared index in PostgreSQL instead, pushing the worktree before each query or, with
//! `--read-only`, only querying (`pg_host`).
//!
//! Exit codes: 0 when there are hits, 1 when there are none, 2 on an error, which prints its
//! `index_contract::ErrorCode`, a fixed message and what to do on stderr, and under `--json` the
//! `{"code", "message"}` object on stdout.
#![deny(missing_docs)]

mod failure;
mod git;
mod host;
mod mcp;
mod pg_host;
mod quote;
mod semantic;
mod serve;
mod stdio;
mod watch;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use failure::Failure;
use index_contract::SearchMode;
use repo_search_tool::RepoSearchTool;
use serde_json::{Value, json};

#[derive(Parser)]
#[command(
    name = "repo-search",
    version,
    about = "Fast, honest code search for a git worktree"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Modes are spelled as the tool's schema spells them; the kebab-case form is accepted too.
/// `semantic` is accepted so that the tool, not the command line, refuses it when no backend
/// serves it: the answer is then the contract's `ErrorCode::Unsupported`.
#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Literal,
    #[value(name = "indexed_literal", alias = "indexed-literal")]
    IndexedLiteral,
    Semantic,
}

impl Mode {
    fn search_mode(self) -> SearchMode {
        match self {
            Mode::Literal => SearchMode::Literal,
            Mode::IndexedLiteral => SearchMode::IndexedLiteral,
            Mode::Semantic => SearchMode::Semantic,
        }
    }
}

#[derive(clap::Args, Clone)]
struct Location {
    /// A directory inside the worktree (default: the current directory; for `mcp`, the client's
    /// roots when it names them).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Where the index lives (default: this worktree's git directory). Never inside the worktree.
    #[arg(long)]
    index_dir: Option<PathBuf>,
    #[command(flatten)]
    shared: pg_host::SharedArgs,
    /// The semantic mode's model: a directory holding `static-256.bin` (built by `cargo xtask
    /// model static`). Default: $REPO_SEARCH_MODEL_DIR, else
    /// ~/.cache/repo-search/models/all-minilm-l6-v2. Without it `semantic` is not offered.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// When MiniLM re-ranks the first 30 `semantic` hits: a better ranking (stdlib MRR@10 0.446
    /// against 0.365). `kept` (default): when `repo-search index` kept MiniLM's vector of every
    /// chunk, which it does for repositories of up to 20 000 chunks; a query then costs about
    /// one MiniLM pass over the query more. `always` (`--rerank` alone): every query, about
    /// 0.6 s more on Linux while the hits' chunks are new (their vectors are kept in the index
    /// directory for the next process). `never`: the hybrid ranking. Needs MiniLM beside the
    /// static model; without it `kept` serves the hybrid ranking and `always` is refused.
    #[arg(
        long,
        value_enum,
        default_value = "kept",
        num_args = 0..=1,
        default_missing_value = "always",
        require_equals = true
    )]
    rerank: RerankArg,
    /// The longest a query may take, in milliseconds, its refresh included: an index query past
    /// it fails with the code `TIMEOUT`, and a literal search stops with what it found.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = index_contract::limits::DEFAULT_DEADLINE_MS,
        value_parser = clap::value_parser!(u64).range(1..=index_contract::limits::HARD_DEADLINE_MS)
    )]
    deadline_ms: u64,
}

/// `--rerank`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RerankArg {
    Never,
    Kept,
    Always,
}

impl Location {
    /// The directory `--root` names, or the current directory.
    fn root(&self) -> &std::path::Path {
        self.root.as_deref().unwrap_or(std::path::Path::new("."))
    }

    /// The longest a query may take.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.deadline_ms)
    }
}

impl From<RerankArg> for semantic::RerankPolicy {
    fn from(arg: RerankArg) -> Self {
        match arg {
            RerankArg::Never => semantic::RerankPolicy::Never,
            RerankArg::Kept => semantic::RerankPolicy::Kept,
            RerankArg::Always => semantic::RerankPolicy::Always,
        }
    }
}

/// ripgrep's options, with ripgrep's letters; each maps to one argument of the tool.
#[derive(clap::Args)]
struct GrepOptions {
    /// Treat the query as a regular expression (ripgrep's syntax).
    #[arg(long)]
    regex: bool,
    /// Include or (with a leading `!`) exclude files by glob, as `rg -g`. Repeatable.
    #[arg(short = 'g', long = "glob", value_name = "GLOB")]
    globs: Vec<String>,
    /// Only files of this ripgrep type (`rust`, `py`, `c`, ...). Repeatable.
    #[arg(short = 't', long = "type", value_name = "TYPE")]
    types: Vec<String>,
    /// Print only the paths of matching files.
    #[arg(short = 'l', long, conflicts_with = "count")]
    files_with_matches: bool,
    /// Print each matching file with its number of matching lines.
    #[arg(short = 'c', long)]
    count: bool,
    /// Lines of context after each match.
    #[arg(short = 'A', long, value_name = "NUM")]
    after_context: Option<u32>,
    /// Lines of context before each match.
    #[arg(short = 'B', long, value_name = "NUM")]
    before_context: Option<u32>,
    /// Lines of context before and after each match (-A and -B override it).
    #[arg(short = 'C', long, value_name = "NUM")]
    context: Option<u32>,
    /// Skip this many hits of the answer's order (with --page-token, exactly one page on).
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// The `page_token` of the previous page (under --json).
    #[arg(long)]
    page_token: Option<String>,
    /// Search hidden files and directories too.
    #[arg(long)]
    hidden: bool,
    /// Search files that ignore rules exclude too.
    #[arg(long)]
    no_ignore: bool,
}

impl GrepOptions {
    /// Adds the options that are set to the tool's arguments; options left at their defaults
    /// are not sent, so a mode that does not offer them is not refused for them.
    fn add_to(&self, args: &mut Value) {
        if self.regex {
            args["regex"] = json!(true);
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
enum Command {
    /// Search for a fixed string or, with --regex, a regular expression.
    Search {
        /// The text to find: a fixed string on one line, or a regex with --regex.
        query: String,
        #[command(flatten)]
        location: Location,
        /// `indexed_literal` (default): ranked, one hit per file, from the always-fresh index.
        /// `literal`: every matching line, scanned now. `semantic`: files ranked by how well they
        /// match a description, when the model is installed (see --model-dir).
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
        /// Refresh and answer here even when a `repo-search serve` runs for this index.
        #[arg(long)]
        no_server: bool,
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
    fn json(&self) -> bool {
        match self {
            Command::Search { json, .. } | Command::Status { json, .. } => *json,
            _ => false,
        }
    }
}

/// Says what `repo-search index` did for the re-rank's kept vectors, on stderr.
fn report_kept_vectors(kept: Option<semantic::KeptVectors>) {
    use semantic::KeptVectors;
    match kept {
        None => {}
        Some(KeptVectors::NoMiniLm) => eprintln!(
            "semantic answers are not re-ranked: MiniLM (model.safetensors, config.json) is not \
             beside the static model; `cargo xtask tools` installs it"
        ),
        Some(KeptVectors::TooManyChunks { live }) => eprintln!(
            "semantic answers are not re-ranked by default: {live} chunks is more than the {} \
             whose MiniLM vectors the index keeps (--rerank re-ranks anyway, embedding as it goes)",
            semantic::KEPT_CHUNKS_LIMIT
        ),
        Some(KeptVectors::Busy) => eprintln!(
            "another process (a `repo-search mcp` or `serve`, or another `index`) is keeping \
             MiniLM's vectors now: semantic answers are re-ranked once it is done"
        ),
        Some(KeptVectors::Kept {
            live,
            computed,
            skipped,
            unkept,
            seconds,
        }) => {
            eprintln!(
                "kept MiniLM vectors of {} of {live} chunks ({computed} computed in {seconds:.1} s)",
                live.saturating_sub(skipped + unkept)
            );
        }
    }
}

/// Opens the host for a command: on the shared index when one is named and the command queries
/// an index.
async fn open_host(location: &Location, modes: host::HostModes) -> Result<host::Host, Failure> {
    open_host_for(location, modes, false).await
}

/// [`open_host`], serving `semantic` too when `with_model` and the model is installed (on the
/// embedded index; a shared index serves no `semantic`).
async fn open_host_for(
    location: &Location,
    modes: host::HostModes,
    with_model: bool,
) -> Result<host::Host, Failure> {
    let deadline = location.deadline();
    if modes != host::HostModes::LiteralOnly
        && let Some(backend) = location.shared.backend()?
    {
        return pg_host::open(location.root(), backend, deadline).await;
    }
    let model = with_model
        .then(|| semantic::find_model(location.model_dir.as_deref()))
        .flatten();
    let options = host::OpenOptions {
        index_dir: location.index_dir.as_deref(),
        modes,
        semantic: model.as_deref().map(|model_dir| host::SemanticSetup {
            model_dir,
            rerank: location.rerank.into(),
        }),
        deadline,
    };
    let host = host::Host::open(location.root(), &options)?;
    if modes == host::HostModes::Watching
        && let Some(damage) = &host.semantic_damage
    {
        // A long-lived host says once why it serves no `semantic`, and serves the rest.
        let failure = Failure::ModelDamaged(damage.clone());
        eprintln!(
            "repo-search: `semantic` is not served: {}\nhint: {}",
            failure.message(),
            failure.hint()
        );
    }
    Ok(host)
}

/// `repo-search status` for a person: the index's state, revision, age and size, then where it
/// lives (`place`, one line).
pub(crate) fn print_status(status: &index_contract::IndexStatus, files: u64, place: &str) {
    println!("state:     {}", status.state);
    println!(
        "revision:  {}",
        status.source_revision.as_deref().unwrap_or("-")
    );
    println!(
        "updated:   {}",
        status.updated_at.map_or("-".into(), |t| {
            when(t.0, index_contract::UnixMillis::now().0)
        })
    );
    println!("files:     {files}");
    println!("{place}");
}

/// A time for a person: the UTC date and time in ISO 8601, and how long ago it was
/// (`2026-12-02T10:27:07Z (3 min ago)`). Epoch milliseconds are for `--json`.
fn when(millis: u64, now: u64) -> String {
    let secs = millis / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm, for the proleptic Gregorian calendar.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let age = match now.saturating_sub(millis) / 1000 {
        _ if now < millis => "in the future".to_owned(),
        s if s < 60 => format!("{s} s ago"),
        s if s < 3600 => format!("{} min ago", s / 60),
        s if s < 86_400 => format!("{} h ago", s / 3600),
        s => format!("{} days ago", s / 86_400),
    };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z ({age})",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Opens the host for a command that serves `semantic` too when the model is installed.
async fn open_host_with_model(
    location: &Location,
    modes: host::HostModes,
) -> Result<host::Host, Failure> {
    open_host_for(location, modes, true).await
}

/// Answers one call of the tool on the host, for the CLI and MCP alike: validate the arguments,
/// then, for an index query, hold its scope to the literal scan's on-disk rules and refresh the
/// index, then search. A refused call costs no refresh.
pub(crate) async fn answer(host: &host::Host, arguments: &Value) -> Result<Value, Failure> {
    answer_with(host, arguments, Refresh::First).await
}

/// Whether an index query refreshes the index before it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refresh {
    /// Refresh, then answer: every call of the tool.
    First,
    /// The index was refreshed for an earlier page of the same `search`: the pages of one
    /// command are one answer, taken from the worktree as it was when the command began (as a
    /// grep reads each file once), and the freshness gate still judges each page.
    Done,
}

async fn answer_with(
    host: &host::Host,
    arguments: &Value,
    refresh: Refresh,
) -> Result<Value, Failure> {
    let request = host
        .tool
        .parse_arguments(arguments)
        .map_err(Failure::Tool)?;
    // A regex, glob or type that cannot compile is refused before it costs a refresh.
    search_profile::check_patterns(&request).map_err(Failure::Tool)?;
    if request.mode.is_indexed() && host.tool.modes().contains(&request.mode) {
        failure::check_scope_on_disk(&host.root, request.path.as_deref())?;
        if refresh == Refresh::First {
            match (&host.shared, &host.served) {
                (Some(shared), _) => shared.refresh().await?,
                (_, Some(served)) => served
                    .refresh(request.mode)
                    .await
                    .map_err(|code| code.map_or(Failure::ServerGone, Failure::RefreshFailed))?,
                _ => drop(host.refresh(request.mode).await?),
            }
        }
    }
    let result = host
        .tool
        .call_request(request)
        .await
        .map_err(Failure::Tool)?;
    serde_json::to_value(&result)
        .map_err(|_| Failure::Tool(index_contract::IndexError::BackendFailed))
}

/// Whether the command line asked for JSON: `--json` before any `--`.
fn json_asked(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    args.skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// A command line clap refused: under `--json`, the `{code, message}` object on stdout and
/// clap's words on stderr, exit 2; otherwise clap's own report. Help and version are not errors.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let shown = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if shown || !json_asked(std::env::args_os()) {
        e.exit();
    }
    println!("{}", Failure::Usage.to_json());
    let _ = e.print();
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let json = cli.command.json();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return Failure::Runtime.report(json),
    };
    match rt.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(failure) => failure.report(json),
    }
}

/// The completion script for `shell`.
fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "repo-search", &mut script);
    if shell != clap_complete::Shell::Bash {
        return script;
    }
    // clap_complete's bash script names a command's state `repo__search__subcmd__search` in its
    // dispatch loop but `repo__subcmd__search__subcmd__search` in its case arms when the binary's
    // name holds a hyphen, so no option after a command ever completed
    // (https://github.com/clap-rs/clap/issues/6421). The arms are spelled as the loop spells them.
    String::from_utf8_lossy(&script)
        .replace("repo__subcmd__search", "repo__search")
        .into_bytes()
}

/// The manual page of `repo-search`, or of one of its commands (`repo-search-search(1)`).
fn man_page(command: Option<&str>) -> Result<Vec<u8>, Failure> {
    use clap::CommandFactory;
    let top = Cli::command();
    let page = match command {
        None => top,
        Some(name) => {
            let sub = top
                .get_subcommands()
                .find(|c| c.get_name() == name)
                .ok_or(Failure::Usage)?
                .clone();
            let full = format!("repo-search-{name}");
            sub.name(full.clone()).display_name(full)
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|_| Failure::Usage)?;
    Ok(out)
}

async fn run(command: Command) -> Result<ExitCode, Failure> {
    match command {
        Command::Completions { shell } => {
            let _ = std::io::stdout().write_all(&completions(shell));
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { command } => {
            let page = man_page(command.as_deref())?;
            let _ = std::io::stdout().write_all(&page);
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema { modes } => {
            let modes: Vec<SearchMode> = modes.into_iter().map(Mode::search_mode).collect();
            // The schema depends only on the modes and caps, not on a worktree; the facade over a
            // never-queried backend supplies both.
            let schema = schema_for(&modes)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Index { location } => {
            if let Some(backend) = location.shared.backend()? {
                pg_host::index(location.root(), backend).await?;
                return Ok(ExitCode::SUCCESS);
            }
            let host = open_host_with_model(&location, host::HostModes::Indexed).await?;
            let r = host.rebuild().map_err(|e| match e {
                host::HostError::DiskFull => Failure::DiskFull,
                _ => Failure::RebuildFailed,
            })?;
            eprintln!("indexed {} files at {}", r.upserts, r.revision);
            if location.rerank != RerankArg::Never {
                // The vectors are a cache: failing to keep them fails no index.
                match host.keep_rerank_vectors() {
                    Ok(kept) => report_kept_vectors(kept),
                    Err(e) => eprintln!(
                        "repo-search: MiniLM's vectors were not kept ({}); semantic answers \
                         are not re-ranked by default",
                        Failure::from(e).message()
                    ),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Status { location, json } => {
            if let Some(backend) = location.shared.backend()? {
                pg_host::status(location.root(), backend, json).await?;
                return Ok(ExitCode::SUCCESS);
            }
            let host = open_host(&location, host::HostModes::Indexed).await?;
            let index = host.index.as_ref().ok_or(Failure::IndexUnopenable)?;
            let index_dir = host.index_dir.clone().unwrap_or_default();
            let status = index.current_status();
            let body = json!({
                "root": host.root,
                "index_dir": index_dir,
                "status": status,
                "files": index.len(),
            });
            if json {
                println!("{body}");
            } else {
                print_status(
                    &status,
                    body["files"].as_u64().unwrap_or_default(),
                    &format!("index dir: {}", index_dir.display()),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp { location } => {
            let serve = if location.root.is_some() {
                mcp::Serve::Root(Box::new(
                    open_host_with_model(&location, host::HostModes::Watching).await?,
                ))
            } else {
                // The client's roots name the worktrees; each is opened with the rest of the
                // command line's options.
                mcp::Serve::ClientRoots(Box::new(move |dir| {
                    let mut location = Location {
                        root: Some(dir),
                        ..location.clone()
                    };
                    Box::pin(async move {
                        // One --index-dir holds each root's index in a directory of its own.
                        if let Some(base) = &location.index_dir {
                            location.index_dir =
                                Some(host::index_dir_under(base, location.root())?);
                        }
                        open_host_with_model(&location, host::HostModes::Watching).await
                    })
                }))
            };
            mcp::serve(serve).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { location } => {
            if location.shared.backend()?.is_some() {
                return Err(Failure::BackendNotServed);
            }
            let host = open_host_with_model(&location, host::HostModes::Watching).await?;
            serve::serve(host).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Search {
            query,
            location,
            mode,
            path,
            max_results,
            case_insensitive,
            grep,
            json,
            no_server,
        } => {
            let indexed = mode.search_mode() == SearchMode::IndexedLiteral;
            let mut args = json!({
                "query": query,
                "mode": mode.search_mode().as_str(),
                "case_insensitive": case_insensitive,
            });
            if let Some(p) = path {
                args["path"] = json!(p);
            }
            grep.add_to(&mut args);
            let style = Style {
                highlight: (!grep.regex && !case_insensitive).then_some(query.as_str()),
                color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
                files_only: grep.files_with_matches,
            };
            let mut searcher = Searcher {
                location: &location,
                indexed,
                semantic: mode.search_mode() == SearchMode::Semantic,
                no_server,
                host: None,
                refreshed: false,
            };
            if json {
                // One page: the tool's answer, for a script to page on with --offset and
                // --page-token.
                if let Some(n) = max_results {
                    args["max_results"] = json!(n);
                }
                let result = searcher.page(&args).await?;
                println!("{result}");
                searcher.hint_rerank_vectors();
                return Ok(exit_code(!hits(&result).is_empty()));
            }
            // A person gets every hit: pages at successive `next_offset`s, each proven to follow
            // the one before, printed as they come.
            let mut printer = Printer::new(style);
            let mut left = max_results.unwrap_or(u64::MAX);
            loop {
                args["max_results"] = json!(left.min(PAGE_SIZE));
                let result = searcher.page(&args).await?;
                let page = hits(&result);
                printer.print(&page);
                left = left.saturating_sub(page.len() as u64);
                let next = result.get("next_offset");
                if next
                    .and_then(Value::as_u64)
                    .is_some_and(|n| n > MAX_OFFSET as u64)
                {
                    // The deepest page the tool serves: say so rather than fail.
                    printer.finish(&result, false);
                    eprintln!(
                        "repo-search: stopped after {MAX_OFFSET} hits, the deepest page; narrow the query"
                    );
                    break;
                }
                match (next, left) {
                    (Some(next), 1..) => {
                        args["offset"] = next.clone();
                        args["page_token"] = result["page_token"].clone();
                    }
                    _ => {
                        printer.finish(&result, max_results.is_some_and(|n| n <= printer.printed));
                        break;
                    }
                }
            }
            searcher.hint_rerank_vectors();
            Ok(exit_code(printer.printed > 0))
        }
    }
}

fn schema_for(modes: &[SearchMode]) -> Result<Value, Failure> {
    use std::sync::Arc;
    let dir = std::env::temp_dir();
    let fallback =
        literal_search::LiteralSearch::new(&dir).map_err(|_| Failure::SchemaUnavailable)?;
    let tool = if modes.iter().any(|m| m.is_indexed()) {
        let index = Arc::new(
            embedded_index::EmbeddedIndex::open(&dir, dir.join("repo-search-schema-probe"))
                .map_err(|_| Failure::SchemaUnavailable)?,
        );
        let config = repo_search_tool::IndexedOperationsConfig {
            allowed_modes: modes.to_vec(),
            ..Default::default()
        };
        let ops = repo_search_tool::IndexedRepositoryOperations::new(
            &dir,
            index,
            Arc::new(fallback),
            config,
        )
        .map_err(Failure::Setup)?;
        RepoSearchTool::new(Arc::new(ops), modes).map_err(Failure::Setup)?
    } else {
        RepoSearchTool::new(Arc::new(fallback), modes).map_err(Failure::Setup)?
    };
    Ok(tool.schema())
}

use index_contract::limits::MAX_OFFSET;

/// Hits per page when the CLI prints every hit: the default result cap of the tool.
const PAGE_SIZE: u64 = index_contract::limits::DEFAULT_MAX_RESULTS as u64;

/// Answers one page of a `search`: through a running `serve` for an index query when there is
/// one, otherwise on a host opened here (once, for every page).
struct Searcher<'a> {
    location: &'a Location,
    indexed: bool,
    /// A `semantic` query: answered here, on a host with the model, never through a server.
    semantic: bool,
    no_server: bool,
    host: Option<host::Host>,
    /// An earlier page refreshed the index (see [`Refresh::Done`]).
    refreshed: bool,
}

impl Searcher<'_> {
    /// After a `semantic` answer served by the hybrid ranking only because the index keeps too
    /// few of MiniLM's vectors, says on stderr how to get the re-rank: a CLI call computes none
    /// (it would be gone first), and a search should not take minutes.
    fn hint_rerank_vectors(&self) {
        if self.semantic
            && self
                .host
                .as_ref()
                .is_some_and(host::Host::rerank_awaits_vectors)
        {
            eprintln!(
                "repo-search: run `repo-search index` once, and `semantic` answers here are \
                 re-ranked by MiniLM (a better ranking; `mcp` and `serve` do it by themselves)"
            );
        }
    }

    async fn page(&mut self, args: &Value) -> Result<Value, Failure> {
        // A running server answers an index query, through this process's own gates; without
        // one, or when it stops answering, this process refreshes and answers by itself: the
        // same mode and the same answer. A `serve` keeps an embedded index: a query on a shared
        // index never asks it.
        if (self.indexed || self.semantic)
            && !self.no_server
            && self.host.is_none()
            && self.location.shared.backend()?.is_none()
            && let Some((root, served)) = serve::connect(
                self.location.root(),
                self.location.index_dir.as_deref(),
                self.location.deadline(),
                // Only a `semantic` search asks for the server's semantic setup.
                self.semantic
                    .then(|| self.semantic_setup())
                    .flatten()
                    .as_deref(),
            )
            .await
            && (self.indexed || served.modes().contains(&SearchMode::Semantic))
        {
            self.host = Some(host::Host::on_server(
                root,
                served,
                self.location.deadline(),
            )?);
        }
        let answered = self.answer_here(args).await;
        if self
            .host
            .as_ref()
            .and_then(|h| h.served.as_ref())
            .is_some_and(|served| served.is_gone())
        {
            // The server stopped answering mid-way: this page is answered here, and so are the
            // next ones.
            self.host = None;
            self.refreshed = false;
            self.no_server = true;
            return self.answer_here(args).await;
        }
        answered
    }

    /// What this search would serve `semantic` with, were it answered here.
    fn semantic_setup(&self) -> Option<String> {
        let model = semantic::find_model(self.location.model_dir.as_deref())?;
        Some(host::semantic_setup(&host::SemanticSetup {
            model_dir: &model,
            rerank: self.location.rerank.into(),
        }))
    }

    /// Answers a page on this searcher's host, opening one here when it has none.
    async fn answer_here(&mut self, args: &Value) -> Result<Value, Failure> {
        // A shared index serves no `semantic`: its tool refuses the mode itself, which is the
        // honest answer there, rather than a hint about a model.
        if self.semantic && self.host.is_none() && self.location.shared.backend()?.is_none() {
            let host = open_host_with_model(self.location, host::HostModes::Indexed).await?;
            if !host.serves_semantic() {
                return Err(host
                    .semantic_damage
                    .clone()
                    .map_or(Failure::ModelMissing, Failure::ModelDamaged));
            }
            self.host = Some(host);
        }
        if self.host.is_none() {
            // Only an index query opens the index directory: literal mode never touches it.
            let modes = if self.indexed {
                host::HostModes::Indexed
            } else {
                host::HostModes::LiteralOnly
            };
            self.host = Some(open_host(self.location, modes).await?);
        }
        let host = self.host.as_ref().ok_or(Failure::IndexUnopenable)?;
        let refresh = if self.refreshed {
            Refresh::Done
        } else {
            Refresh::First
        };
        let answered = answer_with(host, args, refresh).await;
        self.refreshed = answered.is_ok();
        answered
    }
}

fn hits(result: &Value) -> Vec<Value> {
    result["hits"].as_array().cloned().unwrap_or_default()
}

fn exit_code(found: bool) -> ExitCode {
    if found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// How hits are shown to a person.
struct Style<'a> {
    /// The fixed string to highlight, when the match is that string exactly.
    highlight: Option<&'a str>,
    color: bool,
    /// `-l`: print each hit's path alone.
    files_only: bool,
}

/// Prints hits as ripgrep does: `path:line:column:text`, context lines as `path-line-text`
/// with `--` between separate groups, `path` alone for `-l` and `path:count` for `-c`. Names and,
/// on a terminal, text are made safe to print first ([`quote`]).
struct Printer<'a> {
    style: Style<'a>,
    out: std::io::StdoutLock<'static>,
    /// Whether stdout is a terminal, which text must not steer.
    terminal: bool,
    /// The file and line last printed, so that overlapping context is printed once.
    last: Option<(String, u64)>,
    /// The last hit printed, whose after-context waits for the hit that follows it.
    pending: Option<Value>,
    printed: u64,
}

impl<'a> Printer<'a> {
    fn new(style: Style<'a>) -> Printer<'a> {
        Printer {
            style,
            out: std::io::stdout().lock(),
            terminal: std::io::stdout().is_terminal(),
            last: None,
            pending: None,
            printed: 0,
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.style.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// `line` as this output may print it.
    fn text<'t>(&self, line: &'t str) -> std::borrow::Cow<'t, str> {
        if self.terminal {
            quote::text(line)
        } else {
            std::borrow::Cow::Borrowed(line)
        }
    }

    fn print(&mut self, hits: &[Value]) {
        for h in hits {
            self.printed += 1;
            let path = h["path"].as_str().unwrap_or("");
            let shown_path = self.paint("35", &quote::path(path));
            if let Some(count) = h["count"].as_u64() {
                let _ = writeln!(self.out, "{shown_path}:{count}");
                continue;
            }
            if self.style.files_only {
                let _ = writeln!(self.out, "{shown_path}");
                continue;
            }
            // The previous hit's after-context ends where this hit's own line begins.
            self.flush_after(Some(h));
            let line = h["line"].as_u64().unwrap_or(0);
            let before = h["before"].as_array().cloned().unwrap_or_default();
            let first = line.saturating_sub(before.len() as u64);
            // A gap since the last line printed in this file (or another file) starts a group.
            let contiguous = self
                .last
                .as_ref()
                .is_some_and(|(p, l)| p == path && *l + 1 >= first);
            let with_context = h.get("before").is_some() || h.get("after").is_some();
            if with_context && self.last.is_some() && !contiguous {
                let _ = writeln!(self.out, "--");
            }
            let from = match &self.last {
                Some((p, l)) if p == path => *l + 1,
                _ => 0,
            };
            for (i, text) in before.iter().enumerate() {
                let n = first + i as u64;
                if n >= from {
                    self.context_line(&shown_path, n, text.as_str().unwrap_or(""));
                }
            }
            if line >= from {
                let snippet = &*self.text(h["snippet"].as_str().unwrap_or(""));
                let col = h["column"].as_u64().unwrap_or(0);
                let text = match self.style.highlight {
                    Some(q) if self.style.color => {
                        snippet.replacen(q, &format!("\x1b[1;31m{q}\x1b[0m"), 1)
                    }
                    _ => snippet.to_owned(),
                };
                let n = self.paint("32", &line.to_string());
                let _ = writeln!(self.out, "{shown_path}:{n}:{col}:{text}");
            }
            self.last = Some((path.to_owned(), line.max(from.saturating_sub(1))));
            // Its after-context waits for the next hit, which may come on the next page: a line
            // that is the next hit's own is printed as a match, not as context.
            self.pending = Some(h.clone());
        }
    }

    /// Prints the pending hit's after-context, up to `next`'s line when it is in the same file.
    fn flush_after(&mut self, next: Option<&Value>) {
        let Some(h) = self.pending.take() else {
            return;
        };
        let path = h["path"].as_str().unwrap_or("");
        let shown_path = self.paint("35", &quote::path(path));
        let line = h["line"].as_u64().unwrap_or(0);
        let stop = next
            .filter(|next| next["path"] == h["path"])
            .and_then(|next| next["line"].as_u64())
            .unwrap_or(u64::MAX);
        let mut last = match &self.last {
            Some((p, l)) if p == path => *l,
            _ => line,
        };
        for (k, text) in h["after"].as_array().into_iter().flatten().enumerate() {
            let n = line + 1 + k as u64;
            if n >= stop {
                break;
            }
            if n > last {
                self.context_line(&shown_path, n, text.as_str().unwrap_or(""));
                last = n;
            }
        }
        self.last = Some((path.to_owned(), last));
    }

    fn context_line(&mut self, path: &str, n: u64, text: &str) {
        let n = self.paint("32", &n.to_string());
        let text = self.text(text);
        let _ = writeln!(self.out, "{path}-{n}-{text}");
    }

    /// Says on stderr why the answer is not every hit there is, unless the person asked for
    /// fewer.
    fn finish(&mut self, result: &Value, cut_as_asked: bool) {
        self.flush_after(None);
        let _ = self.out.flush();
        if result["complete"] == false && !cut_as_asked {
            let why = result["stopped"].as_str().unwrap_or("unknown");
            if why == "unserved_files" {
                let skipped = &result["stats"]["files_skipped"];
                let n = ["non_utf8_path", "refused_path"]
                    .iter()
                    .filter_map(|k| skipped[k].as_u64())
                    .sum::<u64>();
                eprintln!(
                    "repo-search: incomplete answer: {n} matching file(s) not shown, their names \
                     are not UTF-8 or could mislead (rg or ls -b shows them)"
                );
            } else {
                eprintln!(
                    "repo-search: incomplete answer (stopped: {why}); narrow the query, --path or --glob"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::when;

    fn check(millis: u64, now: u64, expected: &str) {
        assert_eq!(when(millis, now), expected, "{millis} at {now}");
    }

    #[test]
    fn status_times_read_as_an_iso_date_and_an_age() {
        check(0, 0, "1970-01-01T00:00:00Z (0 s ago)");
        check(
            951_782_400_000,
            951_782_459_999,
            "2000-02-29T00:00:00Z (59 s ago)",
        );
        check(
            1_796_207_227_000,
            1_796_207_407_000,
            "2026-12-02T10:27:07Z (3 min ago)",
        );
        check(
            1_796_207_227_000,
            1_796_214_427_000,
            "2026-12-02T10:27:07Z (2 h ago)",
        );
        check(
            1_796_207_227_000,
            1_796_466_427_000,
            "2026-12-02T10:27:07Z (3 days ago)",
        );
        check(
            4_102_444_799_000,
            4_102_444_799_000,
            "2099-12-31T23:59:59Z (0 s ago)",
        );
        check(
            1_796_207_227_000,
            1_796_207_226_000,
            "2026-12-02T10:27:07Z (in the future)",
        );
    }
}
