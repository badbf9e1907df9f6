//! The MSRV check of `cargo xtask ci`.
//!
//! No older toolchain can be installed on our machines (no network but the package registries), so
//! the declared `rust-version` is held two ways: clippy's `incompatible_msrv` lint (in `-D
//! warnings`) refuses any std API newer than it in our code, and this check refuses any package in
//! the dependency graph that declares a newer `rust-version` than ours.

use crate::cargo;

/// A `major.minor[.patch]` version as numbers.
fn parse(v: &str) -> Option<(u64, u64, u64)> {
    let mut it = v.split('.').map(|p| p.parse::<u64>().ok());
    let major = it.next()??;
    let minor = it.next().flatten().unwrap_or(0);
    let patch = it.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// Fails when a dependency needs a newer Rust than the workspace declares.
pub(crate) fn msrv() -> Result<(), String> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(crate::root())
        .output()
        .map_err(|e| format!("could not run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err("cargo metadata failed".into());
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let members: Vec<&str> = meta["workspace_members"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let packages = meta["packages"].as_array().cloned().unwrap_or_default();
    let ours = packages
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(&id)))
        .filter_map(|p| p["rust_version"].as_str())
        .filter_map(parse)
        .max()
        .ok_or("the workspace declares no rust-version")?;
    let offenders: Vec<String> = packages
        .iter()
        .filter_map(|p| {
            let v = p["rust_version"].as_str()?;
            (parse(v)? > ours).then(|| format!("{} {} needs Rust {v}", p["name"], p["version"]))
        })
        .collect();
    if offenders.is_empty() {
        eprintln!(
            "msrv: {} packages need at most Rust {}.{}",
            packages.len(),
            ours.0,
            ours.1
        );
        Ok(())
    } else {
        Err(format!(
            "dependencies need a newer Rust than the declared rust-version {}.{}:\n  {}",
            ours.0,
            ours.1,
            offenders.join("\n  ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn versions_compare_numerically() {
        assert!(parse("1.89").unwrap() < parse("1.100").unwrap());
        assert_eq!(parse("1.89"), parse("1.89.0"));
        assert!(parse("1.89.1").unwrap() > parse("1.89").unwrap());
        assert_eq!(parse("x"), None);
    }
}
