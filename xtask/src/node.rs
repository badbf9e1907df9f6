//! `cargo xtask node`: builds the Node.js binding (`crates/repo-search-node`), stages it in
//! `bindings/node/native/`, installs the package's pinned development tools (`npm ci`), then runs
//! its tests (`node --test`, which also packs the package and installs the tarball into a fresh
//! directory) and type-checks a TypeScript file against `index.d.ts` with `tsc --strict`.

use std::path::PathBuf;
use std::process::Command;

use crate::{root, run};

/// The platform part of the native module's name, as the loader computes it
/// (`platformKey()` in `bindings/node/index.js`).
fn platform_key() -> Result<String, String> {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        "x86" => "ia32",
        other => other,
    };
    Ok(if os == "linux" {
        let libc = if cfg!(target_env = "musl") {
            "musl"
        } else {
            "gnu"
        };
        format!("{os}-{arch}-{libc}")
    } else {
        format!("{os}-{arch}")
    })
}

/// The package's directory.
pub(crate) fn package_dir() -> PathBuf {
    root().join("bindings/node")
}

/// Builds the native module with the tests' own build ([`crate::test_build`]: optimised, and
/// sharing the dependencies `cargo test` builds) and copies it to
/// `bindings/node/native/repo-search.<platform>.node`.
pub(crate) fn build() -> Result<(), String> {
    let built = crate::test_build()?.join(format!(
        "{}repo_search_node{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let native = package_dir().join("native");
    std::fs::create_dir_all(&native).map_err(|e| format!("{}: {e}", native.display()))?;
    let staged = native.join(format!("repo-search.{}.node", platform_key()?));
    // Copied to a temporary name and renamed, so that a test process loading the module never
    // maps a half-written file.
    let partial = staged.with_extension("node.partial");
    std::fs::copy(&built, &partial).map_err(|e| format!("{}: {e}", built.display()))?;
    // The test profile keeps line tables for backtraces; a packaged module needs none of it
    // (a tenth of the size). Without binutils' `strip`, the module ships unstripped.
    let stripped = Command::new("strip")
        .arg("--strip-debug")
        .arg(&partial)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        eprintln!("no `strip` on PATH: the staged module keeps its debug information");
    }
    std::fs::rename(&partial, &staged).map_err(|e| format!("{}: {e}", staged.display()))?;
    eprintln!("staged {}", staged.display());
    Ok(())
}

/// `cargo xtask node [--build-only]`.
pub(crate) fn node(args: &[String]) -> Result<(), String> {
    build()?;
    if args.iter().any(|a| a == "--build-only") {
        return Ok(());
    }
    let dir = package_dir();
    run(Command::new("npm")
        .args([
            "ci",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ])
        .current_dir(&dir))?;
    // The test files by name: Node 20's runner would take every module under `test/` for one,
    // the fixtures and the worker's module included.
    let mut tests: Vec<String> = std::fs::read_dir(dir.join("test"))
        .map_err(|e| format!("bindings/node/test: {e}"))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".test.mjs"))
        .map(|n| format!("test/{n}"))
        .collect();
    tests.sort();
    run(Command::new("node")
        .args(["--test", "--test-concurrency=1"])
        .args(&tests)
        .env("REPO_SEARCH_RG", root().join("target/tools/bin/rg"))
        .env("REPO_SEARCH_TEST_MODEL_DIR", crate::model::model_dir())
        .current_dir(&dir))?;
    run(Command::new("node")
        .args([
            "node_modules/typescript/bin/tsc",
            "--strict",
            "-p",
            "test/types",
        ])
        .current_dir(&dir))
}
