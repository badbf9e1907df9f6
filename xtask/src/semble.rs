//! `cargo xtask eval semble`: semantic search judged on real questions. semble's public benchmark
//! questions (`../shared/eval/semble-dev/`: 224 queries over 12 repositories in 6 languages),
//! each repository fetched from the registry its `published.json` names, scored with NDCG@10 as
//! that set's README defines it, beside semble's published numbers.
//!
//! Sources come through the project's own commands, by package name, cached under
//! `target/eval/semble/`: a PyPI sdist (`pip download --no-binary`), an npm tarball (`npm pack`),
//! a Debian source package (`apt-get source`) or a Debian binary package that ships the sources
//! (`apt-get download`, `dpkg -x`), both from package lists of its own that leave the system's
//! untouched. A repository with no reachable source (gson) is reported as not run.
//!
//! Only each repository's benchmark root is indexed, copied into a git worktree of its own. Each
//! query runs as a user runs it: `repo-search search --json --max-results 10`, in `semantic`
//! mode with the defaults (no `index` run, no flag, an empty cache directory: the built-in static
//! model) and, as a baseline, in `indexed_literal -i` with the query as it is. `--model-dir`
//! names a model directory instead; `--rerank` without it uses MiniLM beside the built-in model.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::{cargo, root, run};

const USAGE: &str = "usage: cargo xtask eval semble [--set DIR] [--repo NAME]... [--model-dir DIR] [--rerank never|kept|always] [--per-query FILE]";

/// One repository of the set, as `published.json` describes it.
struct Repo {
    name: String,
    language: String,
    /// The benchmark root in the upstream repository (`None`: the whole repository).
    benchmark_root: Option<String>,
    registry: String,
    package: String,
    version: String,
    /// Where the upstream repository's root is inside the fetched artifact.
    root_in_artifact: Option<String>,
    /// The upstream prefix the package does not have (zod's `packages/zod/`).
    prefix_stripped: Option<String>,
    semble: f64,
    ripgrep: f64,
}

/// A query: its text, its kind and its targets (relevant and secondary, each of gain 1).
struct Query {
    text: String,
    category: String,
    targets: Vec<String>,
}

pub(crate) fn semble(args: &[String]) -> Result<(), String> {
    let mut set = root().join("../shared/eval/semble-dev");
    let mut only: Vec<String> = Vec::new();
    let mut model: Option<PathBuf> = None;
    let mut rerank: Option<String> = None;
    let mut per_query: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--set" => set = it.next().map(PathBuf::from).ok_or(USAGE)?,
            "--repo" => only.push(it.next().ok_or(USAGE)?.clone()),
            "--model-dir" => model = Some(it.next().map(PathBuf::from).ok_or(USAGE)?),
            "--rerank" => rerank = Some(it.next().ok_or(USAGE)?.clone()),
            "--per-query" => per_query = Some(it.next().map(PathBuf::from).ok_or(USAGE)?),
            _ => return Err(USAGE.into()),
        }
    }
    let repos = published(&set)?;
    if let Some(unknown) = only.iter().find(|n| !repos.iter().any(|r| &r.name == *n)) {
        return Err(format!("no repository `{unknown}` in {}", set.display()));
    }
    run(cargo().args([
        "build",
        "--release",
        "-p",
        "repo-search-cli",
        "--bin",
        "repo-search",
    ]))?;
    let cli = root().join("target/release/repo-search");
    let work = root().join("target/eval/semble");
    // The user's view: no model directory but an empty cache, or MiniLM alone for the re-rank.
    let model = match (model, &rerank) {
        (Some(dir), _) => Some(dir),
        (None, None) => None,
        (None, Some(_)) => Some(minilm_only(&work)?),
    };
    let home = work.join("home");
    std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
    let mut rows = Vec::new();
    for repo in repos
        .iter()
        .filter(|r| only.is_empty() || only.contains(&r.name))
    {
        let queries = annotations(&set, &repo.name)?;
        let Some(tree) = fetch(repo, &work)? else {
            eprintln!("{}: no reachable source; not run", repo.name);
            rows.push((repo, queries.len(), None));
            continue;
        };
        let setup = Setup {
            cli: &cli,
            home: &home,
            model: model.as_deref(),
            rerank: rerank.as_deref(),
        };
        let scored = score_repo(repo, &queries, &tree, &setup)?;
        rows.push((repo, queries.len(), Some(scored)));
    }
    if let Some(file) = &per_query {
        write_per_query(file, &rows)?;
    }
    print_table(&rows);
    Ok(())
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn published(set: &Path) -> Result<Vec<Repo>, String> {
    let p = read_json(&set.join("published.json"))?;
    let repos = p["repos"]
        .as_object()
        .ok_or("published.json has no `repos` object")?;
    let text = |v: &Value| v.as_str().map(str::to_owned);
    repos
        .iter()
        .map(|(name, r)| {
            let sp = &r["source_package"];
            Ok(Repo {
                name: name.clone(),
                language: text(&r["language"]).ok_or("a repo has no language")?,
                benchmark_root: text(&r["benchmark_root"]),
                registry: text(&sp["registry"]).unwrap_or_default(),
                package: text(&sp["package"]).unwrap_or_default(),
                version: text(&sp["version"]).unwrap_or_default(),
                root_in_artifact: text(&sp["root_in_artifact"]),
                prefix_stripped: text(&sp["annotation_path_prefix_stripped"]),
                semble: r["semble_hybrid_ndcg10"].as_f64().unwrap_or(f64::NAN),
                ripgrep: r["ripgrep_ndcg10"].as_f64().unwrap_or(f64::NAN),
            })
        })
        .collect()
}

fn annotations(set: &Path, name: &str) -> Result<Vec<Query>, String> {
    let a = read_json(&set.join("annotations").join(format!("{name}.json")))?;
    let items = a.as_array().ok_or("an annotations file is not a list")?;
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|l| l.iter().filter_map(target_path).collect())
            .unwrap_or_default()
    };
    items
        .iter()
        .map(|q| {
            let mut targets = strings(&q["relevant"]);
            for s in strings(&q["secondary"]) {
                if !targets.contains(&s) {
                    targets.push(s);
                }
            }
            let text = q["query"].as_str().unwrap_or_default().to_owned();
            // A query with no target could only score 0, whatever the search answers.
            if targets.is_empty() {
                return Err(format!("{name}: the query `{text}` names no target"));
            }
            Ok(Query {
                text,
                category: q["category"].as_str().unwrap_or("unknown").to_owned(),
                targets,
            })
        })
        .collect()
}

/// A target's path: the set names a target by its path, or by an object with its `path` and the
/// lines that matter when results are chunks. Results here are files, and for a file list the
/// path alone decides (the set's README), so the lines are not read.
fn target_path(target: &Value) -> Option<String> {
    target
        .as_str()
        .or_else(|| target["path"].as_str())
        .map(str::to_owned)
}

/// Fetches and unpacks `repo` once (a stamp marks a finished unpack), and returns its benchmark
/// root made a git worktree of its own; `None` when no registry reachable here has its source.
fn fetch(repo: &Repo, work: &Path) -> Result<Option<PathBuf>, String> {
    let Some(in_artifact) = &repo.root_in_artifact else {
        return Ok(None);
    };
    let unpacked = work.join("src").join(&repo.name);
    let stamp = unpacked.join(".unpacked");
    if !stamp.is_file() {
        let _ = std::fs::remove_dir_all(&unpacked);
        let downloads = work.join("downloads").join(&repo.name);
        std::fs::create_dir_all(&downloads).map_err(|e| format!("{}: {e}", downloads.display()))?;
        std::fs::create_dir_all(&unpacked).map_err(|e| format!("{}: {e}", unpacked.display()))?;
        let (pkg, ver) = (&repo.package, &repo.version);
        match repo.registry.as_str() {
            "pypi" => {
                run(Command::new("python3")
                    .args([
                        "-m",
                        "pip",
                        "download",
                        "--no-deps",
                        "--no-binary",
                        ":all:",
                        "--quiet",
                        "-d",
                    ])
                    .arg(&downloads)
                    .arg(format!("{pkg}=={ver}")))?;
                untar(&single_file(&downloads)?, &unpacked)?;
            }
            "npm" => {
                run(Command::new("npm")
                    .args([
                        "pack",
                        &format!("{pkg}@{ver}"),
                        "--silent",
                        "--pack-destination",
                    ])
                    .arg(&downloads))?;
                untar(&single_file(&downloads)?, &unpacked)?;
            }
            "debian-source" => apt(work, &["source", "-qq"], pkg, ver, &unpacked)?,
            "debian-binary" => {
                apt(work, &["download", "-q"], pkg, ver, &downloads)?;
                run(Command::new("dpkg-deb")
                    .arg("-x")
                    .arg(single_file(&downloads)?)
                    .arg(&unpacked))?;
            }
            _ => return Ok(None),
        }
        std::fs::write(&stamp, b"").map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    // The benchmark root, as the package lays it out.
    let mut root_dir = unpacked.join(in_artifact);
    if let Some(bench) = &repo.benchmark_root {
        let inside = match &repo.prefix_stripped {
            Some(prefix) => bench.strip_prefix(prefix.as_str()).unwrap_or(bench),
            None => bench,
        };
        root_dir = root_dir.join(inside);
    }
    if !root_dir.is_dir() {
        return Err(format!(
            "{}: no benchmark root at {}",
            repo.name,
            root_dir.display()
        ));
    }
    let tree = work.join("trees").join(&repo.name);
    if !tree.join(".git").is_dir() {
        let _ = std::fs::remove_dir_all(&tree);
        std::fs::create_dir_all(tree.parent().ok_or("no parent")?).map_err(|e| e.to_string())?;
        run(Command::new("cp").arg("-R").arg(&root_dir).arg(&tree))?;
        run(Command::new("git").args(["init", "-q"]).current_dir(&tree))?;
    }
    Ok(Some(tree))
}

/// The one file a download directory holds.
fn single_file(dir: &Path) -> Result<PathBuf, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_file())
        .collect();
    match files.len() {
        1 => Ok(files.remove(0)),
        n => Err(format!(
            "{} holds {n} files, not one download",
            dir.display()
        )),
    }
}

fn untar(archive: &Path, into: &Path) -> Result<(), String> {
    run(Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(into))
}

/// The package lists `apt` reads here: Debian bookworm's binary and source packages, with its
/// updates and security fixes, whose pinned versions `published.json` names.
const APT_SOURCES: &str = "\
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian bookworm-updates main
deb-src http://deb.debian.org/debian-security bookworm-security main
";

/// `apt-get COMMAND pkg=ver` in `into` (`source` or `download`), from package lists of this
/// command's own (the system's lists and sources stay untouched, and the pinned version is found
/// whatever the system's lists are). The lists are fetched when they are new or changed, and
/// once more when the command fails: a pinned version may have been published since.
fn apt(work: &Path, command: &[&str], pkg: &str, ver: &str, into: &Path) -> Result<(), String> {
    let apt = work.join("apt");
    let lists = apt.join("lists");
    std::fs::create_dir_all(lists.join("partial"))
        .map_err(|e| format!("{}: {e}", lists.display()))?;
    let sources = apt.join("sources.list");
    let changed = std::fs::read_to_string(&sources).ok().as_deref() != Some(APT_SOURCES);
    std::fs::write(&sources, APT_SOURCES).map_err(|e| format!("{}: {e}", sources.display()))?;
    let options = [
        format!("Dir::Etc::SourceList={}", sources.display()),
        "Dir::Etc::SourceParts=/nonexistent".to_owned(),
        format!("Dir::State::Lists={}", lists.display()),
        "APT::Sandbox::User=root".to_owned(),
    ];
    let apt_get = || {
        let mut c = Command::new("apt-get");
        for o in &options {
            c.arg("-o").arg(o);
        }
        c
    };
    let update = || run(apt_get().args(["update", "-qq"]));
    if changed || std::fs::read_dir(&lists).map_or(0, |d| d.count()) < 3 {
        update()?;
    }
    let fetch = || {
        run(apt_get()
            .args(command)
            .arg(format!("{pkg}={ver}"))
            .current_dir(into))
    };
    fetch().or_else(|_| {
        update()?;
        fetch()
    })
}

/// A model directory holding MiniLM's files but no static model (hard links into the installed
/// one), so that `semantic` runs on the built-in static model with MiniLM for the re-rank.
fn minilm_only(work: &Path) -> Result<PathBuf, String> {
    let installed = crate::model::model_dir();
    let dir = work.join("minilm-only");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let entries = std::fs::read_dir(&installed)
        .map_err(|e| format!("{}: {e} (run `cargo xtask tools`)", installed.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let name = entry.file_name();
        let is_file = entry.file_type().map_err(|e| e.to_string())?.is_file();
        if !is_file || name.to_string_lossy().starts_with("static-") {
            continue;
        }
        let to = dir.join(&name);
        if !to.exists() {
            std::fs::hard_link(entry.path(), &to)
                .or_else(|_| std::fs::copy(entry.path(), &to).map(|_| ()))
                .map_err(|e| format!("{}: {e}", to.display()))?;
        }
    }
    Ok(dir)
}

/// How each query is run.
struct Setup<'a> {
    cli: &'a Path,
    /// An empty home and cache directory, so that no installed model is found by default.
    home: &'a Path,
    model: Option<&'a Path>,
    rerank: Option<&'a str>,
}

/// What one repository scored: NDCG@10 per mode, and per query kind for `semantic`.
struct Scored {
    semantic: f64,
    literal: f64,
    by_category: BTreeMap<String, Vec<f64>>,
    /// Each query's `semantic` answer and score, for `--per-query`.
    answers: Vec<Value>,
}

/// Writes every query's `semantic` answer, one JSON object per line, so that a change to the
/// ranking can be read query by query; the results are still reported as means.
fn write_per_query(file: &Path, rows: &[(&Repo, usize, Option<Scored>)]) -> Result<(), String> {
    let mut out = String::new();
    for (_, _, scored) in rows {
        for answer in scored.iter().flat_map(|s| &s.answers) {
            out.push_str(&answer.to_string());
            out.push('\n');
        }
    }
    std::fs::write(file, out).map_err(|e| format!("{}: {e}", file.display()))
}

fn score_repo(
    repo: &Repo,
    queries: &[Query],
    tree: &Path,
    setup: &Setup<'_>,
) -> Result<Scored, String> {
    // Answers name files from the indexed directory; the annotations name them from the
    // upstream repository's root.
    let prefix = repo
        .benchmark_root
        .as_deref()
        .map(|b| format!("{}/", b.trim_end_matches('/')))
        .unwrap_or_default();
    let (mut semantic, mut literal, mut answers) = (Vec::new(), Vec::new(), Vec::new());
    let mut by_category: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for q in queries {
        let mut args = vec!["--mode".to_owned(), "semantic".to_owned()];
        if let Some(model) = setup.model {
            args.push("--model-dir".to_owned());
            args.push(model.to_string_lossy().into_owned());
        }
        if let Some(r) = setup.rerank {
            args.push(format!("--rerank={r}"));
        }
        let files = search(setup, tree, &q.text, &args)?;
        let s = ndcg10(&files, &prefix, &q.targets);
        answers.push(serde_json::json!({
            "repo": repo.name,
            "category": q.category,
            "query": q.text,
            "targets": q.targets,
            "answer": files.iter().map(|f| format!("{prefix}{f}")).collect::<Vec<_>>(),
            "ndcg10": s,
        }));
        let l = ndcg10(
            &search(
                setup,
                tree,
                &q.text,
                &["--mode".into(), "indexed_literal".into(), "-i".into()],
            )?,
            &prefix,
            &q.targets,
        );
        by_category.entry(q.category.clone()).or_default().push(s);
        semantic.push(s);
        literal.push(l);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    eprintln!(
        "{}: semantic {:.4}, indexed_literal -i {:.4} ({} queries)",
        repo.name,
        mean(&semantic),
        mean(&literal),
        queries.len()
    );
    Ok(Scored {
        semantic: mean(&semantic),
        literal: mean(&literal),
        by_category,
        answers,
    })
}

/// The files `repo-search search` ranks first, best first, at most 10.
fn search(
    setup: &Setup<'_>,
    tree: &Path,
    query: &str,
    mode: &[String],
) -> Result<Vec<String>, String> {
    let cli = setup.cli;
    let out = Command::new(cli)
        .env_remove("REPO_SEARCH_MODEL_DIR")
        .env("HOME", setup.home)
        .env("XDG_CACHE_HOME", setup.home)
        .arg("search")
        .arg("--root")
        .arg(tree)
        .args(mode)
        .args(["--json", "--max-results", "10", "--no-server", "--"])
        .arg(query)
        .output()
        .map_err(|e| format!("could not run {}: {e}", cli.display()))?;
    // Exit 1 is "no hits", which scores 0; anything else is a failure of the run.
    if !matches!(out.status.code(), Some(0 | 1)) {
        return Err(format!(
            "repo-search search failed on {}: {}",
            tree.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut files = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        for hit in v["hits"].as_array().into_iter().flatten() {
            if let Some(p) = hit["path"].as_str()
                && !files.iter().any(|f| f == p)
            {
                files.push(p.to_owned());
            }
        }
    }
    files.truncate(10);
    Ok(files)
}

/// NDCG@10 as semble scores a file list: a target is found at the rank of the first result whose
/// path equals it or ends with `/` + it; each found target adds 1/log2(rank + 1); the ideal is
/// min(10, #targets) targets at the top.
fn ndcg10(results: &[String], prefix: &str, targets: &[String]) -> f64 {
    let paths: Vec<String> = results
        .iter()
        .take(10)
        .map(|r| format!("{prefix}{r}"))
        .collect();
    let dcg: f64 = targets
        .iter()
        .filter_map(|t| {
            paths
                .iter()
                .position(|p| p == t || p.ends_with(&format!("/{t}")))
                .map(|i| 1.0 / ((i + 2) as f64).log2())
        })
        .sum();
    let ideal: f64 = (0..targets.len().min(10))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    // `+ 0.0` turns a -0.0 sum into 0.0, so that a table never prints "-0.0000".
    if ideal == 0.0 { 0.0 } else { dcg / ideal + 0.0 }
}

fn print_table(rows: &[(&Repo, usize, Option<Scored>)]) {
    println!(
        "\n| repo | language | queries | semantic | indexed_literal -i | semble hybrid | ripgrep (published) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let mut by_language: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    let mut by_category: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let (mut ours, mut base, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    for (repo, n, scored) in rows {
        match scored {
            Some(s) => {
                println!(
                    "| {} | {} | {n} | {:.4} | {:.4} | {:.4} | {:.4} |",
                    repo.name, repo.language, s.semantic, s.literal, repo.semble, repo.ripgrep
                );
                by_language
                    .entry(&repo.language)
                    .or_default()
                    .push((s.semantic, repo.semble));
                for (c, v) in &s.by_category {
                    by_category.entry(c.clone()).or_default().extend(v);
                }
                ours.push(s.semantic);
                base.push(s.literal);
                theirs.push(repo.semble);
            }
            None => println!(
                "| {} | {} | {n} | not run: no reachable source | | {:.4} | {:.4} |",
                repo.name, repo.language, repo.semble, repo.ripgrep
            ),
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    println!(
        "| **mean over the {} repositories run** | | | **{:.4}** | {:.4} | {:.4} | |",
        ours.len(),
        mean(&ours),
        mean(&base),
        mean(&theirs)
    );
    println!("\n| language | semantic | semble hybrid |\n| --- | --- | --- |");
    for (language, v) in &by_language {
        let (a, b): (Vec<f64>, Vec<f64>) = v.iter().copied().unzip();
        println!("| {language} | {:.4} | {:.4} |", mean(&a), mean(&b));
    }
    println!("\n| query kind | queries | semantic (mean over queries) |\n| --- | --- | --- |");
    for (c, v) in &by_category {
        println!("| {c} | {} | {:.4} |", v.len(), mean(v));
    }
}

#[cfg(test)]
mod tests {
    use super::{ndcg10, target_path};

    #[test]
    fn a_target_with_a_line_range_is_scored_by_its_path() {
        let check = |target: serde_json::Value, expected: Option<&str>| {
            assert_eq!(target_path(&target).as_deref(), expected, "{target}");
        };
        check(
            serde_json::json!("lib/rack/request.rb"),
            Some("lib/rack/request.rb"),
        );
        check(
            serde_json::json!({"path": "lib/rack/builder.rb", "start_line": 36, "end_line": 80}),
            Some("lib/rack/builder.rb"),
        );
        check(serde_json::json!({"start_line": 1}), None);
        check(serde_json::json!(3), None);
    }

    fn check(results: &[&str], prefix: &str, targets: &[&str], expected: f64) {
        let results: Vec<String> = results.iter().map(|s| (*s).to_owned()).collect();
        let targets: Vec<String> = targets.iter().map(|s| (*s).to_owned()).collect();
        let got = ndcg10(&results, prefix, &targets);
        assert!(
            (got - expected).abs() < 1e-9,
            "{results:?} {targets:?}: {got} != {expected}"
        );
    }

    #[test]
    fn ndcg10_scores_as_the_set_defines_it() {
        check(&["mux.go"], "", &["mux.go"], 1.0);
        check(&["a.go", "mux.go"], "", &["mux.go"], 1.0 / 3f64.log2());
        // Two targets, one found first: DCG 1 over the ideal 1 + 1/log2(3).
        check(
            &["mux.go"],
            "",
            &["mux.go", "chain.go"],
            1.0 / (1.0 + 1.0 / 3f64.log2()),
        );
        // Paths from the benchmark root, targets from the repository's; a suffix also matches.
        check(
            &["v4/core/schemas.ts"],
            "packages/zod/src/",
            &["packages/zod/src/v4/core/schemas.ts"],
            1.0,
        );
        check(&["x/lib/a.rb"], "", &["lib/a.rb"], 1.0);
        check(&["xlib/a.rb"], "", &["lib/a.rb"], 0.0);
        // Only the top 10 count.
        let eleven: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
        let refs: Vec<&str> = eleven.iter().map(String::as_str).collect();
        check(&refs, "", &["f10"], 0.0);
        check(&[], "", &[], 0.0);
    }
}
