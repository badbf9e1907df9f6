//! Tidy: checks over the workspace's own source and docs that no compiler or linter makes, run by
//! `cargo test` (as rust-analyzer's `tidy.rs` is).
//!
//! Every check walks the same list of files (`git ls-files`, tracked plus untracked-but-not-ignored,
//! so a new file is checked before it is committed), collects every offender as `path:line: why`,
//! and fails with the whole list. Each check is a pure function over a [`Workspace`], so the
//! self-tests at the bottom can show it failing on a small made-up workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::OnceLock;

/// The files of a workspace: every path (repo-relative, `/`-separated), with the text of the
/// Rust and Markdown files and of the `Cargo.toml` manifests.
struct Workspace {
    files: BTreeMap<String, String>,
    dirs: BTreeSet<String>,
}

impl Workspace {
    fn new(files: BTreeMap<String, String>) -> Workspace {
        let mut dirs = BTreeSet::new();
        for path in files.keys() {
            let mut dir = path.as_str();
            while let Some((parent, _)) = dir.rsplit_once('/') {
                dirs.insert(parent.to_owned());
                dir = parent;
            }
        }
        Workspace { files, dirs }
    }

    fn exists(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        self.files.contains_key(path) || self.dirs.contains(path)
    }

    fn with_extension<'a>(&'a self, ext: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.files
            .iter()
            .filter(move |(p, _)| p.ends_with(ext))
            .map(|(p, t)| (p.as_str(), t.as_str()))
    }

    /// The directory of the package that owns `path`: the nearest ancestor with a `Cargo.toml`.
    fn package_of(&self, path: &str) -> Option<String> {
        let mut dir = path;
        while let Some((parent, _)) = dir.rsplit_once('/') {
            if self.files.contains_key(&format!("{parent}/Cargo.toml")) {
                return Some(parent.to_owned());
            }
            dir = parent;
        }
        self.files.contains_key("Cargo.toml").then(String::new)
    }
}

/// The real workspace, read once.
fn workspace() -> &'static Workspace {
    static WORKSPACE: OnceLock<Workspace> = OnceLock::new();
    WORKSPACE.get_or_init(|| {
        let root = crate::root();
        let out = Command::new("git")
            .current_dir(&root)
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .output()
            .expect("tidy needs `git` and a git checkout of the workspace");
        assert!(out.status.success(), "git ls-files failed");
        let mut files = BTreeMap::new();
        for path in out.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
            let path = String::from_utf8(path.to_vec()).expect("repository paths are UTF-8");
            let full = root.join(&path);
            // A tracked file deleted in the worktree is not part of it.
            if !full.is_file() {
                continue;
            }
            let text =
                if path.ends_with(".rs") || path.ends_with(".md") || path.ends_with("Cargo.toml") {
                    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"))
                } else {
                    String::new()
                };
            files.insert(path, text);
        }
        Workspace::new(files)
    })
}

/// Fails with every offender, one per line.
fn report(what: &str, offenders: Vec<String>) {
    assert!(
        offenders.is_empty(),
        "{what}: {} offender(s)\n  {}\n",
        offenders.len(),
        offenders.join("\n  ")
    );
}

// ----------------------------------------------------------------------------------------------
// The checks on the real workspace.

#[test]
fn docs_cite_only_existing_tests() {
    report(
        "a doc cites a test that does not exist",
        cited_tests_that_do_not_exist(workspace()),
    );
}

#[test]
fn doc_references_resolve() {
    report(
        "a doc names a path or link that does not resolve",
        unresolved_doc_references(workspace()),
    );
}

#[test]
fn error_code_strings_live_only_in_index_contract() {
    report(
        "an `ERR_PRISM_INDEX_` code string outside index-contract and tests (use `ErrorCode::as_str()`)",
        error_code_strings_outside_the_contract(workspace()),
    );
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    report(
        "a .rs file whose first line is not a `//!` doc",
        rust_files_without_a_module_doc(workspace()),
    );
}

#[test]
fn tests_do_not_include_other_crates_files_by_path() {
    report(
        "a `#[path]` reaches into another package (share it through index-testkit instead)",
        path_includes_across_packages(workspace()),
    );
}

/// The segment format's doc and its `MAGIC` constant must agree (generic: any file with a
/// `const MAGIC` and a `//!` line documenting a quoted magic).
#[test]
fn segment_magic_doc_matches_code() {
    report(
        "a documented magic disagrees with `const MAGIC`",
        magic_docs_that_disagree(workspace()),
    );
}

#[test]
fn terminal_and_protocol_crates_only_in_the_cli() {
    report(
        "a crate other than repo-search-cli depends on clap, rmcp or indicatif (the libraries are \
         shared by every transport; terminal and protocol code stays in the binary)",
        cli_only_dependencies_elsewhere(workspace()),
    );
}

#[test]
fn internal_dependencies_go_through_the_workspace_table() {
    report(
        "a workspace crate depends on another by path or version (use `name.workspace = true` \
         and list it in the root's `[workspace.dependencies]`)",
        internal_dependencies_outside_the_workspace_table(workspace()),
    );
}

#[test]
fn docs_carry_no_development_history() {
    report(
        "a doc tells the project's history (docs say what is and why; history lives in git)",
        development_history_in_docs(workspace()),
    );
}

// ----------------------------------------------------------------------------------------------
// Doc citations and references.

/// One backticked span of a Markdown file, classified.
#[derive(Debug, Clone, PartialEq)]
enum Reference {
    /// `file.rs::name` (or a bare name continuing such a list, or a bare name that reads as a
    /// test name): `file` is the resolved test file, or why it did not resolve.
    Test {
        file: Result<String, String>,
        name: String,
    },
    /// A bare name long enough to be a test name, cited without its file.
    TestAnywhere { name: String },
    /// A `.rs` file named alone.
    RustFile { file: Result<String, String> },
    /// A repository path (its first component is a top-level entry of the repository), or a
    /// Markdown link target, and whether it exists.
    Path { path: String, exists: bool },
}

/// Every reference of every Markdown file, as `(doc, line, reference)`.
fn doc_references(ws: &Workspace) -> Vec<(String, usize, Reference)> {
    let top_level: BTreeSet<&str> = ws
        .files
        .keys()
        .map(|p| p.split('/').next().unwrap_or(p))
        .collect();
    let mut out = Vec::new();
    for (doc, text) in ws.with_extension(".md") {
        for block in blocks(text) {
            scan_block(ws, &top_level, doc, &block, &mut out);
        }
    }
    out
}

/// A block of Markdown in which a citation's crate or file carries over to later citations: one
/// table cell, one list item or one paragraph. Each character keeps its line number.
type Block = Vec<(usize, char)>;

fn blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Block = Vec::new();
    let mut fenced = false;
    let flush = |blocks: &mut Vec<Block>, current: &mut Block| {
        if !current.is_empty() {
            blocks.push(std::mem::take(current));
        }
    };
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            flush(&mut blocks, &mut current);
            continue;
        }
        if fenced {
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('#') {
            flush(&mut blocks, &mut current);
            continue;
        }
        if trimmed.starts_with('|') {
            flush(&mut blocks, &mut current);
            for cell in split_cells(trimmed) {
                blocks.push(cell.chars().map(|c| (n, c)).collect());
            }
            continue;
        }
        let list_item = trimmed.starts_with("- ")
            || trimmed.starts_with("* ")
            || trimmed
                .split_once(". ")
                .is_some_and(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
        if list_item {
            flush(&mut blocks, &mut current);
        }
        current.extend(line.chars().map(|c| (n, c)));
        current.push((n, '\n'));
    }
    flush(&mut blocks, &mut current);
    blocks
}

/// The cells of a table row; a `|` inside a code span does not split.
fn split_cells(row: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut in_code = false;
    for c in row.chars() {
        match c {
            '`' => in_code = !in_code,
            '|' if !in_code => {
                cells.push(String::new());
                continue;
            }
            _ => {}
        }
        cells.last_mut().expect("never empty").push(c);
    }
    cells
}

fn scan_block(
    ws: &Workspace,
    top_level: &BTreeSet<&str>,
    doc: &str,
    block: &Block,
    out: &mut Vec<(String, usize, Reference)>,
) {
    let text: String = block.iter().map(|&(_, c)| c).collect();
    let chars: Vec<char> = text.chars().collect();
    let line_at = |i: usize| block[i.min(block.len() - 1)].0;
    // What later spans of this block inherit: the crate last named, and the test file of the
    // last test citation (for bare names continuing a list).
    let mut crate_ctx: Option<String> = None;
    let mut last_test_file: Option<Result<String, String>> = None;
    let mut last_end: Option<usize> = None;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '['
            && let Some((target, end)) = link_target(&chars, i)
        {
            if let Some(path) = link_path(doc, &target) {
                let exists = ws.exists(&path);
                out.push((doc.to_owned(), line_at(i), Reference::Path { path, exists }));
            }
            i = end;
            continue;
        }
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let Some(len) = chars[i + 1..].iter().position(|&c| c == '`') else {
            break;
        };
        let span: String = chars[i + 1..i + 1 + len].iter().collect();
        let between: String = last_end
            .map(|e| chars[e..i].iter().collect())
            .unwrap_or_default();
        let continues_a_list = matches!(between.trim(), "," | "and" | ", and" | "or" | ", or");
        let line = line_at(i);
        last_end = Some(i + 1 + len + 1);
        i += len + 2;
        let continued = last_test_file.take();
        if let Some(reference) = classify(ws, top_level, doc, &span, &mut crate_ctx) {
            if let Reference::Test { file, .. } = &reference {
                last_test_file = Some(file.clone());
            }
            out.push((doc.to_owned(), line, reference));
        } else if is_identifier(&span) {
            if let (Some(file), true) = (continued, continues_a_list) {
                last_test_file = Some(file.clone());
                out.push((doc.to_owned(), line, Reference::Test { file, name: span }));
            } else if span.split('_').count() >= 4 {
                out.push((doc.to_owned(), line, Reference::TestAnywhere { name: span }));
            }
        }
    }
}

fn is_identifier(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `[text](target)` starting at `i`: the target and the index after `)`.
fn link_target(chars: &[char], i: usize) -> Option<(String, usize)> {
    let close = i + chars[i..].iter().position(|&c| c == ']')?;
    if chars.get(close + 1) != Some(&'(') {
        return None;
    }
    let end = close + 2 + chars[close + 2..].iter().position(|&c| c == ')')?;
    Some((chars[close + 2..end].iter().collect(), end + 1))
}

/// A relative link's repository path, normalised; `None` for URLs and in-page anchors.
fn link_path(doc: &str, target: &str) -> Option<String> {
    let target = target.split('#').next().unwrap_or("");
    if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let base = doc.rsplit_once('/').map_or("", |(d, _)| d);
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

fn classify(
    ws: &Workspace,
    top_level: &BTreeSet<&str>,
    doc: &str,
    span: &str,
    crate_ctx: &mut Option<String>,
) -> Option<Reference> {
    if span.chars().any(char::is_whitespace) {
        return None;
    }
    if let Some((file, name)) = span.split_once("::")
        && file.ends_with(".rs")
    {
        let file = resolve_test_file(ws, file, crate_ctx);
        return Some(Reference::Test {
            file,
            name: name.to_owned(),
        });
    }
    if span.ends_with(".rs") && !span.contains(['<', '*']) {
        let file = resolve_test_file(ws, span, crate_ctx);
        return Some(Reference::RustFile { file });
    }
    if span.contains(['<', '>', '*', '…', '{', '$']) {
        return None;
    }
    let first = span.split('/').next().unwrap_or(span);
    if span.contains('/') && top_level.contains(first) {
        let path = span.trim_end_matches('/').to_owned();
        if let Some(krate) = path.strip_prefix("crates/") {
            *crate_ctx = Some(krate.split('/').next().unwrap_or(krate).to_owned());
        }
        let exists = ws.exists(&path);
        return Some(Reference::Path { path, exists });
    }
    if span.ends_with(".md") && !span.contains('/') {
        // A bare doc name: next to the doc naming it, or in `docs/`.
        let here = link_path(doc, span).unwrap_or_default();
        let exists = ws.exists(&here) || ws.exists(&format!("docs/{span}"));
        return Some(Reference::Path {
            path: span.to_owned(),
            exists,
        });
    }
    None
}

/// Resolves a cited test file: a repository path; `crate/file.rs` (in `crates/crate/tests/`);
/// or a file named without its crate, found in the crate named earlier in the same block or,
/// failing that, in exactly one `tests/` directory of the workspace.
fn resolve_test_file(
    ws: &Workspace,
    spec: &str,
    crate_ctx: &mut Option<String>,
) -> Result<String, String> {
    if ws.files.contains_key(spec) {
        if let Some(krate) = spec.strip_prefix("crates/") {
            *crate_ctx = krate.split('/').next().map(str::to_owned);
        }
        return Ok(spec.to_owned());
    }
    if let Some((krate, rest)) = spec.split_once('/')
        && ws.dirs.contains(&format!("crates/{krate}"))
    {
        *crate_ctx = Some(krate.to_owned());
        let path = format!("crates/{krate}/tests/{rest}");
        return if ws.files.contains_key(&path) {
            Ok(path)
        } else {
            Err(format!("`{spec}`: no file {path}"))
        };
    }
    let file = spec.strip_prefix("tests/").unwrap_or(spec);
    if let Some(krate) = crate_ctx.as_deref() {
        let path = format!("crates/{krate}/tests/{file}");
        if ws.files.contains_key(&path) {
            return Ok(path);
        }
    }
    let suffix = format!("/tests/{file}");
    let found: Vec<&String> = ws.files.keys().filter(|p| p.ends_with(&suffix)).collect();
    match found.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!("`{spec}`: no tests/{file} in any package")),
        many => Err(format!(
            "`{spec}` is ambiguous ({}): name the crate, as in `crate/{file}`",
            many.iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Whether `text` defines a function called `name`.
fn defines_fn(text: &str, name: &str) -> bool {
    let needle = format!("fn {name}");
    text.match_indices(&needle).any(|(at, _)| {
        let after = text[at + needle.len()..].chars().next();
        let before = text[..at].chars().next_back();
        matches!(after, Some('(' | '<')) && !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

fn cited_tests_that_do_not_exist(ws: &Workspace) -> Vec<String> {
    let mut offenders = Vec::new();
    for (doc, line, reference) in doc_references(ws) {
        match reference {
            Reference::Test {
                file: Err(why),
                name,
            } => {
                offenders.push(format!("{doc}:{line}: test `{name}`: {why}"));
            }
            Reference::Test {
                file: Ok(file),
                name,
            } => {
                if !defines_fn(&ws.files[&file], &name) {
                    offenders.push(format!("{doc}:{line}: no `fn {name}` in {file}"));
                }
            }
            Reference::TestAnywhere { name } => {
                if !ws
                    .with_extension(".rs")
                    .any(|(_, text)| defines_fn(text, &name))
                {
                    offenders.push(format!(
                        "{doc}:{line}: `{name}` reads as a test name, but no .rs file defines it"
                    ));
                }
            }
            Reference::RustFile { .. } | Reference::Path { .. } => {}
        }
    }
    offenders
}

fn unresolved_doc_references(ws: &Workspace) -> Vec<String> {
    let mut offenders = Vec::new();
    for (doc, line, reference) in doc_references(ws) {
        match reference {
            Reference::RustFile { file: Err(why) } => {
                offenders.push(format!("{doc}:{line}: {why}"));
            }
            Reference::Path {
                path,
                exists: false,
            } => offenders.push(format!("{doc}:{line}: `{path}` does not exist")),
            _ => {}
        }
    }
    offenders
}

// ----------------------------------------------------------------------------------------------
// Source rules.

fn error_code_strings_outside_the_contract(ws: &Workspace) -> Vec<String> {
    const PREFIX: &str = "ERR_PRISM_INDEX_";
    let mut offenders = Vec::new();
    for (path, text) in ws.with_extension(".rs") {
        let allowed = path.starts_with("crates/index-contract/")
            || path.split('/').any(|component| component == "tests");
        if allowed {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            // A code, not the family: `ERR_PRISM_INDEX_*` in prose names no code.
            let names_a_code = line.match_indices(PREFIX).any(|(at, _)| {
                line[at + PREFIX.len()..].starts_with(|c: char| c.is_ascii_uppercase())
            });
            if names_a_code {
                offenders.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    offenders
}

fn rust_files_without_a_module_doc(ws: &Workspace) -> Vec<String> {
    ws.with_extension(".rs")
        .filter(|(_, text)| !text.starts_with("//!"))
        .map(|(path, _)| format!("{path}:1"))
        .collect()
}

/// `#[path]` includes that may cross packages, each with the reason it must.
const CROSS_PACKAGE_INCLUDES: &[(&str, &str, &str)] = &[
    (
        "crates/repo-search-tool/tests/fuzz_regressions.rs",
        "fuzz/src/lib.rs",
        "the fuzz package is its own workspace on libfuzzer-sys, so it cannot be a dev-dependency; \
         the replay must run the very checks the fuzz targets run",
    ),
    (
        "crates/semantic-index/tests/fuzz_model_headers.rs",
        "fuzz/src/model_headers.rs",
        "the same, for the model headers' check, which needs semantic-index and so is replayed \
         by its tests rather than by repo-search-tool's",
    ),
];

fn path_includes_across_packages(ws: &Workspace) -> Vec<String> {
    let mut offenders = Vec::new();
    for (path, text) in ws.with_extension(".rs") {
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        for (i, line) in text.lines().enumerate() {
            let Some(rest) = line.trim_start().strip_prefix("#[path") else {
                continue;
            };
            let target = rest.split('"').nth(1).unwrap_or("");
            let resolved = link_path(&format!("{dir}/x"), target).unwrap_or_default();
            let crosses = ws.package_of(path) != ws.package_of(&resolved);
            let allowed = CROSS_PACKAGE_INCLUDES
                .iter()
                .any(|&(from, to, _)| from == path && to == resolved);
            if crosses && !allowed {
                offenders.push(format!("{path}:{}: includes {resolved}", i + 1));
            }
        }
    }
    offenders
}

// ----------------------------------------------------------------------------------------------
// Manifests.

/// The dependencies only the binary may have, each with the crates of its family (`clap_complete`).
const CLI_ONLY: &[&str] = &["clap", "rmcp", "indicatif"];

/// The manifest whose package may depend on [`CLI_ONLY`].
const CLI_MANIFEST: &str = "crates/repo-search-cli/Cargo.toml";

/// One entry of a manifest's dependency table (`[dependencies]`, `[dev-dependencies]`,
/// `[build-dependencies]`, and their `[target.….dependencies]` forms), in any of TOML's shapes:
/// `name = "1"`, `name = { … }`, `name.key = …` or a `[dependencies.name]` table.
#[derive(Debug, Default)]
struct Dependency {
    line: usize,
    key: String,
    /// The crate it renames (`package = "…"`).
    package: Option<String>,
    /// Whether it goes through `[workspace.dependencies]` (`workspace = true`).
    workspace: bool,
    /// Whether it names a `path`.
    path: bool,
}

impl Dependency {
    fn crate_name(&self) -> &str {
        self.package.as_deref().unwrap_or(&self.key)
    }

    fn set(&mut self, key: &str, value: &str) {
        match key.trim() {
            "workspace" => self.workspace = value.trim() == "true",
            "path" => self.path = true,
            "package" => self.package = Some(value.trim().trim_matches('"').to_owned()),
            _ => {}
        }
    }
}

/// A manifest line without its comment (a `#` outside a string).
fn without_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (c, quote) {
            ('"' | '\'', None) => quote = Some(c),
            (c, Some(q)) if c == q => quote = None,
            ('#', None) => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Every dependency a manifest's package declares. `[workspace.dependencies]` declares what
/// members may use and is not read.
fn dependencies(manifest: &str) -> Vec<Dependency> {
    let mut out: Vec<Dependency> = Vec::new();
    // Outside a dependency table: None; in a list of them: Some(None); in one dependency's own
    // table: Some(Some(its index in `out`)).
    let mut table: Option<Option<usize>> = None;
    // Where the current table's entries start in `out`.
    let mut section = 0;
    for (i, raw) in manifest.lines().enumerate() {
        let line = without_comment(raw).trim();
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_matches(|c| c == '[' || c == ']');
            let parts: Vec<&str> = header.split('.').map(str::trim).collect();
            let is_list = |p: &str| {
                matches!(
                    p,
                    "dependencies" | "dev-dependencies" | "build-dependencies"
                )
            };
            let of_package = parts.first() != Some(&"workspace");
            section = out.len();
            table = match parts.as_slice() {
                [.., last] if of_package && is_list(last) => Some(None),
                [.., list, name] if of_package && is_list(list) => {
                    out.push(Dependency {
                        line: i + 1,
                        key: name.trim_matches('"').to_owned(),
                        ..Dependency::default()
                    });
                    Some(Some(out.len() - 1))
                }
                _ => None,
            };
            continue;
        }
        let (Some(table), Some((key, value))) = (table, line.split_once('=')) else {
            continue;
        };
        if let Some(own) = table {
            out[own].set(key, value);
            continue;
        }
        let (name, attribute) = match key.split_once('.') {
            Some((name, attribute)) => (name.trim().trim_matches('"'), Some(attribute)),
            None => (key.trim().trim_matches('"'), None),
        };
        // `name.key = …` lines add to the entry of that name in the same table.
        let earlier = attribute.and(out[section..].iter().rposition(|d| d.key == name));
        let at = match earlier {
            Some(at) => section + at,
            None => {
                out.push(Dependency {
                    line: i + 1,
                    key: name.to_owned(),
                    ..Dependency::default()
                });
                out.len() - 1
            }
        };
        match attribute {
            Some(attribute) => out[at].set(attribute, value),
            // `{ path = "…", workspace = true, features = ["a", "b"] }`: a feature list's
            // commas cut it into pieces without `=`, which set nothing.
            None => {
                if let Some(inline) = value.trim().strip_prefix('{') {
                    let inline = inline.trim_end_matches('}');
                    for (k, v) in inline.split(',').filter_map(|piece| piece.split_once('=')) {
                        out[at].set(k, v);
                    }
                }
            }
        }
    }
    out
}

/// Whether `name` is `family` or one of its crates (`clap_complete`, `rmcp-macros`).
fn of_family(name: &str, family: &str) -> bool {
    name.strip_prefix(family)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['_', '-']))
}

fn cli_only_dependencies_elsewhere(ws: &Workspace) -> Vec<String> {
    let mut offenders = Vec::new();
    for (path, text) in &ws.files {
        if !(path == "Cargo.toml" || path.ends_with("/Cargo.toml")) || path == CLI_MANIFEST {
            continue;
        }
        for d in dependencies(text) {
            if CLI_ONLY.iter().any(|f| of_family(d.crate_name(), f)) {
                offenders.push(format!("{path}:{}: depends on {}", d.line, d.crate_name()));
            }
        }
    }
    offenders
}

/// The root's `[workspace] members`, as manifest paths (a trailing `/*` is expanded), and the
/// root itself when it is a package.
fn member_manifests(ws: &Workspace) -> Vec<String> {
    let root = ws.files.get("Cargo.toml").map_or("", String::as_str);
    let mut manifests = Vec::new();
    if root
        .lines()
        .any(|l| without_comment(l).trim() == "[package]")
    {
        manifests.push("Cargo.toml".to_owned());
    }
    // From the `members = [` line to the first `]`.
    let list: Vec<&str> = root
        .lines()
        .map(without_comment)
        .skip_while(|l| !l.trim_start().starts_with("members"))
        .collect();
    let list = list.join("\n");
    let list = list.split(']').next().unwrap_or("");
    for member in list.split([',', '\n']) {
        let Some(member) = member.split('"').nth(1) else {
            continue;
        };
        if let Some(parent) = member.strip_suffix("/*") {
            let prefix = format!("{parent}/");
            manifests.extend(
                ws.files
                    .keys()
                    .filter(|p| {
                        p.strip_prefix(&prefix)
                            .and_then(|rest| rest.strip_suffix("/Cargo.toml"))
                            .is_some_and(|dir| !dir.contains('/'))
                    })
                    .cloned(),
            );
        } else {
            manifests.push(format!("{member}/Cargo.toml"));
        }
    }
    manifests
}

/// The `name` of a manifest's `[package]`.
fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(|l| without_comment(l).trim()) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "name"
        {
            return Some(value.trim().trim_matches('"').to_owned());
        }
    }
    None
}

fn internal_dependencies_outside_the_workspace_table(ws: &Workspace) -> Vec<String> {
    let members = member_manifests(ws);
    let internal: BTreeSet<String> = members
        .iter()
        .filter_map(|m| ws.files.get(m).and_then(|t| package_name(t)))
        .collect();
    let mut offenders = Vec::new();
    for manifest in &members {
        let Some(text) = ws.files.get(manifest) else {
            continue;
        };
        for d in dependencies(text) {
            let by_path = d.path;
            if (by_path || internal.contains(d.crate_name())) && !d.workspace {
                offenders.push(format!(
                    "{manifest}:{}: `{}` {}",
                    d.line,
                    d.key,
                    if by_path { "by path" } else { "by version" }
                ));
            }
        }
    }
    offenders
}

// ----------------------------------------------------------------------------------------------
// Development history.

// Phrases that tell how the project got here rather than what it is: an issue or a session named
// by its number, "the issue", and a session or slice (a round of work) named by its place in the
// project's history. Whole words, any case, across line breaks; a word is a run of letters and
// digits, so "issue #15", "session-7" and "the issue's" match too. Plain comments are not docs
// and are not read.
const NUMBERED: &[&str] = &["issue", "issues", "session", "sessions"];
const ROUNDS: &[&str] = &["session", "sessions", "slice", "slices"];
const PLACES: &[&str] = &[
    "this", "that", "last", "previous", "next", "earlier", "later", "first", "second", "third",
];

/// The text of every doc, word by word with its line: each Markdown file, and the `//!` and
/// `///` lines of each Rust file.
fn doc_words(ws: &Workspace) -> Vec<(&str, Vec<(usize, String)>)> {
    let mut docs = Vec::new();
    for (path, text) in &ws.files {
        let rust = path.ends_with(".rs");
        if !rust && !path.ends_with(".md") {
            continue;
        }
        let mut words = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let doc = if rust {
                let t = line.trim_start();
                match t.strip_prefix("//!").or_else(|| t.strip_prefix("///")) {
                    Some(doc) => doc,
                    None => continue,
                }
            } else {
                line
            };
            words.extend(
                doc.split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .map(|w| (i + 1, w.to_lowercase())),
            );
        }
        docs.push((path.as_str(), words));
    }
    docs
}

fn development_history_in_docs(ws: &Workspace) -> Vec<String> {
    let mut offenders = Vec::new();
    for (path, words) in doc_words(ws) {
        for pair in words.windows(2) {
            let [(line, a), (_, b)] = pair else { continue };
            let (a, b) = (a.as_str(), b.as_str());
            let history = (NUMBERED.contains(&a) && b.bytes().all(|c| c.is_ascii_digit()))
                || (a == "the" && b == "issue")
                || (PLACES.contains(&a) && ROUNDS.contains(&b));
            if history {
                offenders.push(format!("{path}:{line}: \"{a} {b}\""));
            }
        }
    }
    offenders
}

/// Files with a `const MAGIC` byte string: every `//!` line that mentions a magic and quotes a
/// string must quote the same bytes.
fn magic_docs_that_disagree(ws: &Workspace) -> Vec<String> {
    let mut offenders = Vec::new();
    for (path, text) in ws.with_extension(".rs") {
        let Some(code) = text
            .lines()
            .find(|l| l.trim_start().starts_with("const MAGIC") || l.contains(" const MAGIC"))
            .and_then(|l| l.split_once('='))
            .and_then(|(_, value)| quoted(value))
        else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            let Some(doc) = line.trim_start().strip_prefix("//!") else {
                continue;
            };
            if !doc.to_ascii_lowercase().contains("magic") {
                continue;
            }
            if let Some(documented) = quoted(doc)
                && documented != code
            {
                offenders.push(format!(
                    "{path}:{}: documents the magic as {} but `const MAGIC` is {}",
                    i + 1,
                    escape(&documented),
                    escape(&code)
                ));
            }
        }
    }
    offenders
}

/// The bytes of the first `"..."` (or `b"..."`) literal in `s`, with Rust's escapes decoded.
fn quoted(s: &str) -> Option<Vec<u8>> {
    let start = s.find('"')? + 1;
    let mut out = Vec::new();
    let mut chars = s[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                '0' => out.push(0),
                'n' => out.push(b'\n'),
                'r' => out.push(b'\r'),
                't' => out.push(b'\t'),
                'x' => {
                    let hex: String = chars.by_ref().take(2).collect();
                    out.push(u8::from_str_radix(&hex, 16).ok()?);
                }
                other => {
                    let mut buf = [0; 4];
                    out.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                }
            },
            c => {
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    None
}

fn escape(bytes: &[u8]) -> String {
    format!("\"{}\"", bytes.escape_ascii())
}

// ----------------------------------------------------------------------------------------------
// Self-tests: each check fails on a workspace made to break it.

fn made_up(files: &[(&str, &str)]) -> Workspace {
    Workspace::new(
        files
            .iter()
            .map(|&(p, t)| (p.to_owned(), t.to_owned()))
            .collect(),
    )
}

/// A small workspace in the real one's shape, to which a case adds one file.
fn base() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\n    \"crates/index-guard\",\n    \"crates/repo-search-tool\",\n]\n\n\
             [workspace.dependencies]\nindex-guard = { path = \"crates/index-guard\" }\nclap = \"4\"\n",
        ),
        (
            "crates/index-guard/Cargo.toml",
            "[package]\nname = \"index-guard\"\n",
        ),
        ("crates/index-guard/src/lib.rs", "//! Guard.\n"),
        (
            "crates/index-guard/tests/guard.rs",
            "//! Tests.\n#[test]\nfn mode_is_checked() {}\n#[test]\nfn freshness_is_checked_before_use() {}\n",
        ),
        (
            "crates/repo-search-tool/Cargo.toml",
            "[package]\nname = \"repo-search-tool\"\n\n[dependencies]\nindex-guard.workspace = true\n",
        ),
        (
            "crates/repo-search-cli/Cargo.toml",
            "[package]\nname = \"repo-search-cli\"\n\n[dependencies]\nclap = { workspace = true }\n",
        ),
        (
            "crates/repo-search-tool/tests/facade.rs",
            "//! Tests.\nfn check() {}\n#[test]\nfn cancel_is_timeout() {}\n",
        ),
        ("docs/tool.md", "# Tool\n"),
    ]
}

fn check(case: (&str, &str), expected: &[&str]) {
    let mut files = base();
    files.push(case);
    let ws = made_up(&files);
    let mut got = Vec::new();
    got.extend(cited_tests_that_do_not_exist(&ws));
    got.extend(unresolved_doc_references(&ws));
    got.extend(error_code_strings_outside_the_contract(&ws));
    got.extend(rust_files_without_a_module_doc(&ws));
    got.extend(path_includes_across_packages(&ws));
    got.extend(magic_docs_that_disagree(&ws));
    got.extend(cli_only_dependencies_elsewhere(&ws));
    got.extend(internal_dependencies_outside_the_workspace_table(&ws));
    got.extend(development_history_in_docs(&ws));
    assert_eq!(got, expected, "case {}", case.0);
}

#[test]
fn each_tidy_check_fails_on_a_violation_and_passes_without_one() {
    let doc = "docs/x.md";
    // Citations that resolve, in every shape the docs use.
    check(
        (
            doc,
            "| a | `index-guard/guard.rs::mode_is_checked`, `freshness_is_checked_before_use` |\n\
             Pinned by `facade.rs::check` and `repo-search-tool/facade.rs::check`, `cancel_is_timeout`.\n\
             - `tests/guard.rs`, `crates/index-guard/src/lib.rs`, [tool](tool.md), `tool.md`, `docs/`\n\
             - (`freshness_is_checked_before_use`) is found without its file; `max_results` is a field.\n\
             ```\n`index-guard/guard.rs::in_a_code_block_is_ignored`\n```\n",
        ),
        &[],
    );
    // A typo in a cited test, in a continued name, in a crate, in a file; a long bare name.
    check(
        (doc, "`index-guard/guard.rs::mode_is_chekced`\n"),
        &["docs/x.md:1: no `fn mode_is_chekced` in crates/index-guard/tests/guard.rs"],
    );
    check(
        (
            doc,
            "| r | `index-guard/guard.rs::mode_is_checked`, `cancel_is_timeout` |\n",
        ),
        &["docs/x.md:1: no `fn cancel_is_timeout` in crates/index-guard/tests/guard.rs"],
    );
    check(
        (doc, "`index-gaurd/guard.rs::mode_is_checked`\n"),
        &[
            "docs/x.md:1: test `mode_is_checked`: `index-gaurd/guard.rs`: no tests/index-gaurd/guard.rs in any package",
        ],
    );
    check(
        (doc, "`index-guard/gaurd.rs::mode_is_checked`\n"),
        &[
            "docs/x.md:1: test `mode_is_checked`: `index-guard/gaurd.rs`: no file crates/index-guard/tests/gaurd.rs",
        ],
    );
    check(
        (doc, "Line one.\n(`freshness_is_checked_before_usage`)\n"),
        &[
            "docs/x.md:2: `freshness_is_checked_before_usage` reads as a test name, but no .rs file defines it",
        ],
    );
    // Paths and links that do not resolve.
    check(
        (
            doc,
            "See `tests/facades.rs`, `crates/index-gaurd` and [t](tol.md).\n",
        ),
        &[
            "docs/x.md:1: `tests/facades.rs`: no tests/facades.rs in any package",
            "docs/x.md:1: `crates/index-gaurd` does not exist",
            "docs/x.md:1: `docs/tol.md` does not exist",
        ],
    );
    // Source rules.
    // Split so that this file does not spell a code itself.
    let stale = ["ERR_PRISM_INDEX", "_STALE"].concat();
    let source =
        format!("//! Codes.\n// An `ERR_PRISM_INDEX_*` code.\nconst C: &str = \"{stale}\";\n");
    check(
        ("crates/index-guard/src/code.rs", &source),
        &[&format!(
            "crates/index-guard/src/code.rs:3: const C: &str = \"{stale}\";"
        )],
    );
    check(("crates/index-guard/tests/code.rs", &source), &[]);
    check(
        ("crates/index-guard/src/bare.rs", "#![no_main]\n//! Late.\n"),
        &["crates/index-guard/src/bare.rs:1"],
    );
    check(
        (
            "crates/repo-search-tool/tests/other.rs",
            "//! Reaches over.\n#[path = \"../../index-guard/src/lib.rs\"]\nmod guard;\n",
        ),
        &["crates/repo-search-tool/tests/other.rs:2: includes crates/index-guard/src/lib.rs"],
    );
    check(
        (
            "crates/repo-search-tool/tests/own.rs",
            "//! Its own.\n#[path = \"support/mod.rs\"]\nmod support;\n",
        ),
        &[],
    );
    check(
        (
            "crates/index-guard/src/segment.rs",
            "//! magic   8 bytes  \"AB\\0\\x01\"\n\nconst MAGIC: &[u8; 4] = b\"AB\\0\\x02\";\n",
        ),
        &[
            "crates/index-guard/src/segment.rs:1: documents the magic as \"AB\\x00\\x01\" but `const MAGIC` is \"AB\\x00\\x02\"",
        ],
    );
    check(
        (
            "crates/index-guard/src/segment.rs",
            "//! magic   8 bytes  \"AB\\0\\x02\"\n\nconst MAGIC: &[u8; 4] = b\"AB\\0\\x02\";\n",
        ),
        &[],
    );
    // Manifests: the binary's own crates, in every shape a manifest names a dependency.
    let tool = "crates/repo-search-tool/Cargo.toml";
    check(
        (
            tool,
            "[package]\nname = \"repo-search-tool\"\n\n[dependencies]\n\
             index-guard.workspace = true\nclap.workspace = true\n\
             term = { package = \"indicatif\", version = \"0.18\" }\n\
             clapper = \"1\" # clap = \"4\" in a comment\n\n\
             [target.'cfg(unix)'.dev-dependencies]\nrmcp-macros = \"1\"\n\n\
             [dependencies.clap_complete]\nversion = \"4\"\n",
        ),
        &[
            "crates/repo-search-tool/Cargo.toml:6: depends on clap",
            "crates/repo-search-tool/Cargo.toml:7: depends on indicatif",
            "crates/repo-search-tool/Cargo.toml:11: depends on rmcp-macros",
            "crates/repo-search-tool/Cargo.toml:13: depends on clap_complete",
        ],
    );
    // Internal dependencies by path or version, and the ways through the workspace table.
    check(
        (
            tool,
            "[package]\nname = \"repo-search-tool\"\n\n[dependencies]\n\
             index-guard = { path = \"../index-guard\" }\n\
             serde = { version = \"1\", path = \"../../vendor/serde\" }\n\
             tokio = { version = \"1\", features = [\"rt\", \"time\"] }\n\n\
             [dev-dependencies]\nguard = { package = \"index-guard\", version = \"0.1\" }\n\n\
             [target.'cfg(unix)'.dependencies]\nindex-guard.workspace = true\nindex-guard.features = [\"a\"]\n\n\
             [build-dependencies.index-guard]\npath = \"../index-guard\"\n\n\
             [build-dependencies.guard]\npackage = \"index-guard\"\nworkspace = true\n",
        ),
        &[
            "crates/repo-search-tool/Cargo.toml:5: `index-guard` by path",
            "crates/repo-search-tool/Cargo.toml:6: `serde` by path",
            "crates/repo-search-tool/Cargo.toml:10: `guard` by version",
            "crates/repo-search-tool/Cargo.toml:16: `index-guard` by path",
        ],
    );
    // A package outside the members (its own workspace, as `fuzz/`) can only use paths.
    check(
        (
            "fuzz/Cargo.toml",
            "[package]\nname = \"fuzz\"\n\n[workspace]\n\n[dependencies]\n\
             index-guard = { path = \"../crates/index-guard\" }\n",
        ),
        &[],
    );
    // Development history in docs, in any case and across a line break; not in plain comments,
    // and not the same words in other senses.
    check(
        (
            doc,
            "Status: accepted (Issue #16). The first\nslice runs since session-7, within the issue's targets.\n",
        ),
        &[
            "docs/x.md:1: \"issue 16\"",
            "docs/x.md:1: \"first slice\"",
            "docs/x.md:2: \"session 7\"",
            "docs/x.md:2: \"the issue\"",
        ],
    );
    check(
        (
            doc,
            "An MCP session, the database session's settings, each slice of a buffer, an earlier \
             run, 16 open issues.\n",
        ),
        &[],
    );
    check(
        (
            "crates/index-guard/src/history.rs",
            "//! Built in this session.\n/// Since issues 15 and 16.\n// A plain comment on session 3.\nfn f() {}\n",
        ),
        &[
            "crates/index-guard/src/history.rs:1: \"this session\"",
            "crates/index-guard/src/history.rs:2: \"issues 15\"",
        ],
    );
}

#[test]
fn the_walker_sees_the_workspace() {
    // Guards every check above against passing vacuously over an empty list.
    let ws = workspace();
    for path in [
        "Cargo.toml",
        "docs/contract.md",
        "crates/index-contract/src/error.rs",
    ] {
        assert!(ws.files.contains_key(path), "tidy does not see {path}");
    }
    assert!(ws.with_extension(".rs").count() > 50);
    // The manifest checks read every member, and the binary's dependencies as the binary's.
    assert!(member_manifests(ws).len() > 8);
    let cli = dependencies(&ws.files[CLI_MANIFEST]);
    for family in CLI_ONLY {
        assert!(
            cli.iter().any(|d| d.crate_name() == *family),
            "tidy does not see {family} among the CLI's dependencies"
        );
    }
    let references = doc_references(ws);
    let tests = references
        .iter()
        .filter(|(_, _, r)| matches!(r, Reference::Test { .. }))
        .count();
    let paths = references
        .iter()
        .filter(|(_, _, r)| matches!(r, Reference::Path { .. }))
        .count();
    assert!(
        tests > 40 && paths > 20,
        "tidy reads only {tests} test citations and {paths} paths in the docs"
    );
}
