//! `repo-search`: code search for a git worktree from the command line and over MCP.
//!
//! `repo-search search QUERY` brings the embedded index up to date with the worktree (a full
//! build on first use, an incremental update from git after that) and answers in
//! `indexed_literal` mode; `--mode literal` scans the worktree instead. `repo-search mcp` serves
//! the same `repo_search` tool to an agent over stdio. `repo-search serve` keeps a watching host
//! on a socket in the index directory; `search` asks it first when one runs, and never starts it.
//!
//! Exit codes: 0 when there are hits, 1 when there are none, 2 on an error, which prints its
//! `index_contract::ErrorCode`, a fixed message and what to do on stderr, and under `--json` the
//! `{"code", "message"}` object on stdout.
#![deny(missing_docs)]

mod failure;
mod git;
mod host;
mod mcp;
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

#[derive(clap::Args)]
struct Location {
    /// A directory inside the worktree (default: the current directory).
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Where the index lives (default: this worktree's git directory). Never inside the worktree.
    #[arg(long)]
    index_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Search for a fixed string.
    Search {
        /// The text to find (a fixed string, one line).
        query: String,
        #[command(flatten)]
        location: Location,
        /// `indexed_literal` (default): ranked, one hit per file, from the always-fresh index.
        /// `literal`: every matching line, scanned now. `semantic` needs a semantic backend,
        /// which this build does not have.
        #[arg(long, value_enum, default_value = "indexed_literal")]
        mode: Mode,
        /// Search only this repo-relative directory or file.
        #[arg(long)]
        path: Option<String>,
        /// The most hits to return.
        #[arg(long)]
        max_results: Option<u64>,
        /// Match regardless of case.
        #[arg(short = 'i', long)]
        case_insensitive: bool,
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
}

impl Command {
    fn json(&self) -> bool {
        match self {
            Command::Search { json, .. } | Command::Status { json, .. } => *json,
            _ => false,
        }
    }
}

/// Opens the host for a command.
fn open_host(location: &Location, modes: host::HostModes) -> Result<host::Host, Failure> {
    Ok(host::Host::open(
        &location.root,
        location.index_dir.as_deref(),
        modes,
    )?)
}

/// Answers one call of the tool on the host, for the CLI and MCP alike: validate the arguments,
/// then, for an index query, hold its scope to the literal scan's on-disk rules and refresh the
/// index, then search. A refused call costs no refresh.
pub(crate) async fn answer(host: &host::Host, arguments: &Value) -> Result<Value, Failure> {
    let request = host
        .tool
        .parse_arguments(arguments)
        .map_err(|e| Failure::Tool(e.to_wire()))?;
    if request.mode.is_indexed() && host.tool.modes().contains(&request.mode) {
        failure::check_scope_on_disk(&host.root, request.path.as_deref())?;
        host.refresh().await?;
    }
    let result = host
        .tool
        .call_request(request)
        .await
        .map_err(|e| Failure::Tool(e.to_wire()))?;
    serde_json::to_value(&result)
        .map_err(|_| Failure::Tool(index_contract::IndexError::BackendFailed.to_wire()))
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

async fn run(command: Command) -> Result<ExitCode, Failure> {
    match command {
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
            let host = open_host(&location, host::HostModes::Indexed)?;
            let r = host.rebuild().map_err(|_| Failure::RebuildFailed)?;
            eprintln!("indexed {} files at {}", r.upserts, r.revision);
            Ok(ExitCode::SUCCESS)
        }
        Command::Status { location, json } => {
            let host = open_host(&location, host::HostModes::Indexed)?;
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
                println!("state:     {}", status.state);
                println!(
                    "revision:  {}",
                    status.source_revision.as_deref().unwrap_or("-")
                );
                println!(
                    "updated:   {}",
                    status
                        .updated_at
                        .map_or("-".into(), |t| format!("{} ms since the epoch", t.0))
                );
                println!("files:     {}", body["files"]);
                println!("index dir: {}", index_dir.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp { location } => {
            let host = open_host(&location, host::HostModes::Watching)?;
            mcp::serve(host).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { location } => {
            let host = open_host(&location, host::HostModes::Watching)?;
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
            if let Some(n) = max_results {
                args["max_results"] = json!(n);
            }
            // A running server answers through the same freshness gate; without one, or when it
            // does not answer, this process refreshes by itself. A served error is an answer.
            if indexed
                && !no_server
                && let Some(served) =
                    serve::ask(&location.root, location.index_dir.as_deref(), &args).await
            {
                return Ok(print_result(&served?, json, &query));
            }
            // Only an index query opens the index directory: literal mode never touches it.
            let modes = if indexed {
                host::HostModes::Indexed
            } else {
                host::HostModes::LiteralOnly
            };
            let host = open_host(&location, modes)?;
            let result = answer(&host, &args).await?;
            Ok(print_result(&result, json, &query))
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

fn print_result(result: &Value, as_json: bool, query: &str) -> ExitCode {
    let hits = result["hits"].as_array().cloned().unwrap_or_default();
    let mut out = std::io::stdout().lock();
    if as_json {
        let _ = writeln!(out, "{result}");
    } else {
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        for h in &hits {
            let path = h["path"].as_str().unwrap_or("");
            let snippet = h["snippet"].as_str().unwrap_or("");
            let (line, col) = (
                h["line"].as_u64().unwrap_or(0),
                h["column"].as_u64().unwrap_or(0),
            );
            if color {
                let shown = snippet.replacen(query, &format!("\x1b[1;31m{query}\x1b[0m"), 1);
                let _ = writeln!(
                    out,
                    "\x1b[35m{path}\x1b[0m:\x1b[32m{line}\x1b[0m:{col}:{shown}"
                );
            } else {
                let _ = writeln!(out, "{path}:{line}:{col}:{snippet}");
            }
        }
        if result["complete"] == false {
            let why = result["stopped"].as_str().unwrap_or("unknown");
            eprintln!(
                "repo-search: incomplete answer (stopped: {why}); narrow the query or --path"
            );
        }
    }
    if hits.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
