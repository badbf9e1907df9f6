//! `cargo xtask ci` and `cargo xtask tools`.

use std::process::Command;

use crate::{cargo, root, run};

/// The ripgrep release the differential tests compare against.
pub(crate) const RIPGREP_VERSION: &str = "15.2.0";

/// Installs the peers the tests need under `target/tools`.
pub(crate) fn tools() -> Result<(), String> {
    let tools = root().join("target").join("tools");
    let rg = tools
        .join("bin")
        .join(format!("rg{}", std::env::consts::EXE_SUFFIX));
    let have = Command::new(&rg)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if have
        .as_deref()
        .is_some_and(|v| v.starts_with(&format!("ripgrep {RIPGREP_VERSION}")))
    {
        eprintln!("ripgrep {RIPGREP_VERSION} already in target/tools");
    } else {
        run(cargo()
            .args([
                "install",
                "ripgrep",
                "--locked",
                "--version",
                RIPGREP_VERSION,
                "--root",
            ])
            .arg(&tools))?;
    }
    Ok(())
}

/// The README's test command.
pub(crate) fn ci(_args: &[String]) -> Result<(), String> {
    tools()?;
    run(cargo().args(["fmt", "--all", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo().args(["test", "--workspace"]))?;
    run(cargo()
        .args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings"))?;
    eprintln!("xtask ci: all checks passed");
    Ok(())
}
