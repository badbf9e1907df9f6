//! `cargo xtask ci` and `cargo xtask tools`.

use std::process::Command;

use crate::{cargo, root, run};

/// The ripgrep release the differential tests compare against.
pub(crate) const RIPGREP_VERSION: &str = "15.2.0";

/// The official Python MCP SDK release the MCP test drives the server with.
pub(crate) const MCP_SDK_VERSION: &str = "2.3.0";

/// Installs the peers the tests need under `target/tools`: ripgrep (built by cargo), the
/// Python MCP SDK (in a virtualenv, from PyPI), the TypeScript MCP SDK (with the machine's npm,
/// from the lockfile in `crates/repo-search-cli/tests/node`) and the semantic mode's model (with
/// `repo-search model install`, then its static model built, both from the tests' own build,
/// [`crate::test_build`]); and from the system's packages, PostgreSQL for the `pg-index` tests
/// and man-db for the manual pages' test.
pub(crate) fn tools() -> Result<(), String> {
    ripgrep()?;
    mcp_sdk()?;
    mcp_node()?;
    crate::model::install()?;
    // The semantic tests (and `repo-search --model-dir`) need the static model built from it;
    // its build is deterministic, so an existing file with its checksum is kept.
    let dir = crate::model::model_dir();
    if !dir.join("static-256.bin.sha256").is_file() || !dir.join("static-256.bin").is_file() {
        crate::model::model(&["static".to_owned()])?;
    }
    postgresql()?;
    man_db()
}

/// PostgreSQL for the `pg-index` tests, which run in a throwaway cluster made by
/// `pg_virtualenv` (in Debian's `postgresql-common`). The tests never download a server of
/// their own.
fn postgresql() -> Result<(), String> {
    system_package(
        "PostgreSQL (pg_virtualenv)",
        &["pg_virtualenv", "-h"],
        "postgresql",
    )
}

/// `man` (Debian's man-db), which renders the CLI's manual pages in its tests.
fn man_db() -> Result<(), String> {
    system_package("man (man-db)", &["man", "--version"], "man-db")
}

/// Installs the Debian `package` with apt when `probe` (a command and its arguments) does not
/// run successfully.
fn system_package(what: &str, probe: &[&str], package: &str) -> Result<(), String> {
    let have = Command::new(probe[0])
        .args(&probe[1..])
        .output()
        .is_ok_and(|o| o.status.success());
    if have {
        eprintln!("{what} already installed");
        return Ok(());
    }
    run(Command::new("apt-get").arg("update"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends", package])
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn mcp_sdk() -> Result<(), String> {
    let venv = root().join("target").join("tools").join("mcp-venv");
    let python = venv.join("bin").join("python");
    let have = Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if have.as_deref() == Some(MCP_SDK_VERSION) {
        eprintln!("Python MCP SDK {MCP_SDK_VERSION} already in target/tools/mcp-venv");
        return Ok(());
    }
    let system_python = ["python3", "python"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .ok_or("no python3 on PATH: the MCP test needs it to run the official Python MCP SDK")?;
    run(Command::new(system_python).args(["-m", "venv"]).arg(&venv))?;
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(format!("mcp=={MCP_SDK_VERSION}")))
}

/// The official TypeScript MCP SDK, exactly as `crates/repo-search-cli/tests/node/package-lock.json`
/// pins it, in `target/tools/mcp-node` (`npm ci`: the lockfile's versions and integrity hashes,
/// no install scripts). Kept when its lockfile is the committed one.
fn mcp_node() -> Result<(), String> {
    let source = root().join("crates/repo-search-cli/tests/node");
    let dir = root().join("target/tools/mcp-node");
    let lock = std::fs::read(source.join("package-lock.json"))
        .map_err(|e| format!("reading the TypeScript SDK's lockfile: {e}"))?;
    let installed = dir.join("node_modules/@modelcontextprotocol/sdk/package.json");
    if installed.is_file()
        && std::fs::read(dir.join("package-lock.json")).ok() == Some(lock.clone())
    {
        eprintln!("TypeScript MCP SDK already in target/tools/mcp-node");
        return Ok(());
    }
    for tool in ["node", "npm"] {
        let found = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Err(format!(
                "no `{tool}` on PATH: the MCP tests run the official TypeScript SDK on Node.js \
                 (18 or later) with npm; install them (Debian: apt-get install nodejs npm)"
            ));
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), dir.join(file))
            .map_err(|e| format!("copying {file}: {e}"))?;
    }
    run(Command::new("npm")
        .args([
            "ci",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ])
        .current_dir(&dir))
}

pub(crate) fn ripgrep() -> Result<(), String> {
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
    crate::msrv::msrv()?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo().args(["test", "--workspace"]))?;
    // The Node.js binding: its module, its tests and its types.
    crate::node::node(&[])?;
    run(cargo()
        .args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings"))?;
    run(cargo()
        .args([
            "doc",
            "--workspace",
            "--no-deps",
            "--document-private-items",
        ])
        .env("RUSTDOCFLAGS", "-D warnings"))?;
    // A short smoke run per fuzz target keeps them building and running; finding new inputs is
    // `cargo xtask fuzz`'s longer runs' work (docs/fuzzing.md).
    crate::fuzz::fuzz(&["--seconds".to_owned(), "15".to_owned()])?;
    eprintln!("xtask ci: all checks passed");
    Ok(())
}
