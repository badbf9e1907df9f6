//! `repo-search`: code search for a git worktree from the command line and over MCP.
//!
//! `repo-search search QUERY` brings the embedded index up to date with the worktree (a full
//! build on first use, an incremental update from git after that) and answers in
//! `indexed_literal` mode; `--mode literal` scans the worktree instead. `repo-search mcp` serves
//! the same `repo_search` tool to an agent over stdio.
//!
//! Exit codes: 0 when there are hits, 1 when there are none, 2 on an error (which prints its
//! `ERR_PRISM_INDEX_*` code and what to do).
#![deny(missing_docs)]

mod git;
mod host;
mod mcp;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
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
#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Literal,
    #[value(name = "indexed_literal", alias = "indexed-literal")]
    IndexedLiteral,
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
        /// `literal`: every matching line, scanned now.
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
        /// Print the tool's result object as JSON.
        #[arg(long)]
        json: bool,
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
        /// As JSON.
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
}

/// Opens the host for a command, or prints why not and gives the exit code.
fn open_host(location: &Location, modes: host::HostModes) -> Result<host::Host, ExitCode> {
    host::Host::open(&location.root, location.index_dir.as_deref(), modes)
        .map_err(|e| host_fail(e, false))
}

/// Prints a host error (as `{code, message}` on stdout under `--json`) and gives exit code 2.
fn host_fail(e: host::HostError, json: bool) -> ExitCode {
    if json {
        println!(
            "{}",
            json!({"code": e.code().as_str(), "message": e.message()})
        );
    }
    eprintln!("repo-search: {e}\nhint: {}", e.hint());
    ExitCode::from(2)
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Literal => "literal",
        Mode::IndexedLiteral => "indexed_literal",
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("repo-search: {message}");
    ExitCode::from(2)
}

fn hint(code: &str) -> &'static str {
    match code {
        "ERR_PRISM_INDEX_STALE" => "the index is not fresh: run `repo-search index` to rebuild it",
        "ERR_PRISM_INDEX_FAILED" => {
            "the index is damaged or could not be read: run `repo-search index` to rebuild it"
        }
        "ERR_PRISM_INDEX_UNTRUSTED" => {
            "check --path: it must be repo-relative, with `/` separators and no `..`"
        }
        "ERR_PRISM_INDEX_LIMIT" => "lower --max-results or shorten the query",
        "ERR_PRISM_INDEX_TIMEOUT" => "narrow the query or the --path scope",
        _ => "use --mode literal or --mode indexed_literal, and a non-empty one-line query",
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("could not start the runtime: {e}")),
    };
    rt.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Schema { modes } => {
            let modes: Vec<SearchMode> = modes
                .into_iter()
                .filter_map(|m| SearchMode::parse(mode_name(m)))
                .collect();
            let dir = std::env::temp_dir();
            let ops = match literal_search::LiteralSearch::new(&dir) {
                Ok(l) => l,
                Err(e) => return fail(&e.to_string()),
            };
            // The schema depends only on the modes and caps, not on a worktree; the facade over a
            // never-queried backend supplies both.
            let schema = schema_for(ops, &modes);
            match schema {
                Ok(s) => {
                    println!("{}", serde_json::to_string_pretty(&s).unwrap_or_default());
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        Command::Index { location } => {
            let host = match open_host(&location, host::HostModes::Indexed) {
                Ok(h) => h,
                Err(code) => return code,
            };
            match host.rebuild() {
                Ok(r) => {
                    eprintln!("indexed {} files at {}", r.upserts, r.revision);
                    ExitCode::SUCCESS
                }
                Err(e) => host_fail(e, false),
            }
        }
        Command::Status { location, json } => {
            let host = match host::Host::open(
                &location.root,
                location.index_dir.as_deref(),
                host::HostModes::Indexed,
            ) {
                Ok(h) => h,
                Err(e) => return host_fail(e, json),
            };
            let Some(index) = host.index.as_ref() else {
                return host_fail(host::HostError::IndexDirUnusable, json);
            };
            let status = index.current_status();
            let index_dir = host.index_dir.clone().unwrap_or_default();
            let body = json!({
                "root": host.root,
                "index_dir": index_dir,
                "status": status,
                "files": index.indexed_paths().len(),
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
            ExitCode::SUCCESS
        }
        Command::Mcp { location } => {
            let host = match open_host(&location, host::HostModes::Indexed) {
                Ok(h) => h,
                Err(code) => return code,
            };
            match mcp::serve(host).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e),
            }
        }
        Command::Search {
            query,
            location,
            mode,
            path,
            max_results,
            case_insensitive,
            json,
        } => {
            // Literal mode never touches the index directory.
            let modes = match mode {
                Mode::Literal => host::HostModes::LiteralOnly,
                Mode::IndexedLiteral => host::HostModes::Indexed,
            };
            let host = match host::Host::open(&location.root, location.index_dir.as_deref(), modes)
            {
                Ok(h) => h,
                Err(e) => return host_fail(e, json),
            };
            if matches!(mode, Mode::IndexedLiteral)
                && let Err(e) = host.refresh().await
            {
                return host_fail(e, json);
            }
            let mut args = json!({ "query": query, "mode": mode_name(mode), "case_insensitive": case_insensitive });
            if let Some(p) = path {
                args["path"] = json!(p);
            }
            if let Some(n) = max_results {
                args["max_results"] = json!(n);
            }
            match host.tool.call(&args).await {
                Ok(result) => print_result(&result, json, &query),
                Err(e) => {
                    if json {
                        println!("{}", json!({"code": e.code.as_str(), "message": e.message}));
                    }
                    eprintln!(
                        "repo-search: {}: {}\nhint: {}",
                        e.code.as_str(),
                        e.message,
                        hint(e.code.as_str())
                    );
                    ExitCode::from(2)
                }
            }
        }
    }
}

fn schema_for(
    fallback: literal_search::LiteralSearch,
    modes: &[SearchMode],
) -> Result<Value, String> {
    use std::sync::Arc;
    let dir = std::env::temp_dir();
    let tool = if modes.iter().any(|m| m.is_indexed()) {
        let index = Arc::new(
            embedded_index::EmbeddedIndex::open(&dir, dir.join("repo-search-schema-probe"))
                .map_err(|e| e.to_string())?,
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
        .map_err(|e| e.to_string())?;
        RepoSearchTool::new(Arc::new(ops), modes).map_err(|e| e.to_string())?
    } else {
        RepoSearchTool::new(Arc::new(fallback), modes).map_err(|e| e.to_string())?
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
