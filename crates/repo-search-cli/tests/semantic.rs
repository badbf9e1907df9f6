//! `semantic` end to end: offered and answered with no model installed (the static model is built
//! in), and with the model directory's own static model and MiniLM.
//!
//! The model directory is the one `cargo xtask tools` and `cargo xtask model static` install
//! (`cargo xtask ci` runs both first); the binary finds it through `REPO_SEARCH_MODEL_DIR` or
//! `--model-dir`.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use support::{BIN, McpServer, model_dir, repo, write};

/// A command of the binary that finds a model only where `model` says (`None`: nowhere, since
/// the per-user cache directory is an empty temporary one).
fn command(model: Option<&Path>, cache: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("REPO_SEARCH_MODEL_DIR")
        .env("XDG_CACHE_HOME", cache)
        .env("HOME", cache);
    if let Some(m) = model {
        c.env("REPO_SEARCH_MODEL_DIR", m);
    }
    c
}

/// A small repository of functions, each described nowhere by the words a query uses.
fn functions() -> tempfile::TempDir {
    let dir = repo();
    let files = [
        (
            "src/net.py",
            "import socket\n\ndef open_connection(host, port):\n    sock = socket.create_connection((host, port))\n    sock.settimeout(5)\n    return sock\n",
        ),
        (
            "src/sort.py",
            "def bubble_sort(values):\n    for i in range(len(values)):\n        for j in range(len(values) - i - 1):\n            if values[j] > values[j + 1]:\n                values[j], values[j + 1] = values[j + 1], values[j]\n    return values\n",
        ),
        (
            "src/config.py",
            "import json\n\ndef load_settings(path):\n    with open(path) as f:\n        return json.load(f)\n",
        ),
        (
            "src/hash.py",
            "import hashlib\n\ndef file_digest(path):\n    h = hashlib.sha256()\n    with open(path, 'rb') as f:\n        h.update(f.read())\n    return h.hexdigest()\n",
        ),
    ];
    for (path, text) in files {
        write(dir.path(), path, text);
    }
    dir
}

/// Runs `search --mode semantic --json QUERY` and returns (exit code, stdout as JSON, stderr).
fn semantic_search(root: &Path, model: Option<&Path>, query: &str) -> (i32, Value, String) {
    semantic_search_with(root, model, query, &[])
}

/// [`semantic_search`] with more arguments (`--rerank`).
fn semantic_search_with(
    root: &Path,
    model: Option<&Path>,
    query: &str,
    more: &[&str],
) -> (i32, Value, String) {
    let cache = tempfile::tempdir().unwrap();
    let out = command(model, cache.path())
        .args(["search", "--mode", "semantic", "--json", "--root"])
        .arg(root)
        .args(more)
        .arg(query)
        .output()
        .unwrap();
    let stdout = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// With the model directory's f32 static model, and in a fresh home with an empty cache and no
/// model anywhere (the built-in int8 model): the same first hits.
#[test]
fn search_mode_semantic_finds_a_function_by_a_description() {
    let dir = functions();
    let installed = model_dir();
    for model in [Some(installed.as_path()), None] {
        for (query, want) in [
            ("order a list of numbers", "src/sort.py"),
            ("load the settings stored as json", "src/config.py"),
            ("checksum of a file's contents", "src/hash.py"),
        ] {
            let (code, result, stderr) = semantic_search(dir.path(), model, query);
            assert_eq!(code, 0, "{model:?} {query}: {stderr}");
            assert_eq!(
                result["hits"][0]["path"], want,
                "{model:?} {query}: {result}"
            );
            assert_eq!(result["indexed"]["mode"], "semantic");
            let score = result["hits"][0]["score"].as_f64().unwrap();
            assert!(score > 0.0 && score <= 1.0, "{result}");
        }
        // The hit shows its chunk's first line.
        let (_, result, _) = semantic_search(dir.path(), model, "open a network connection");
        assert_eq!(
            result["hits"][0]["path"], "src/net.py",
            "{model:?}: {result}"
        );
        assert_eq!(result["hits"][0]["line"], 1);
        assert_eq!(result["hits"][0]["snippet"], "import socket");
    }
}

/// `--rerank`: MiniLM re-scores the head, as the evaluation measures it. The answer is the same
/// files, re-ordered and re-scored, still best first and in `[0, 1]`.
#[test]
fn rerank_rescores_the_head_with_minilm() {
    let dir = functions();
    let model = model_dir();
    for (query, want) in [
        ("order a list of numbers", "src/sort.py"),
        ("open a network connection", "src/net.py"),
    ] {
        // `never`: the first `--rerank` call keeps the vectors of this tiny repository's every
        // chunk, after which the default policy re-ranks too.
        let (code, hybrid, stderr) =
            semantic_search_with(dir.path(), Some(&model), query, &["--rerank=never"]);
        assert_eq!(code, 0, "{stderr}");
        let (code, reranked, stderr) =
            semantic_search_with(dir.path(), Some(&model), query, &["--rerank"]);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(reranked["hits"][0]["path"], want, "{query}: {reranked}");
        let hits = |v: &Value| -> Vec<(String, f64)> {
            v["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        h["path"].as_str().unwrap().to_owned(),
                        h["score"].as_f64().unwrap(),
                    )
                })
                .collect()
        };
        let (before, after) = (hits(&hybrid), hits(&reranked));
        let paths = |v: &[(String, f64)]| {
            let mut p: Vec<String> = v.iter().map(|h| h.0.clone()).collect();
            p.sort();
            p
        };
        assert_eq!(paths(&before), paths(&after), "{query}");
        assert!(after.windows(2).all(|w| w[0].1 >= w[1].1), "{after:?}");
        assert!(
            after.iter().all(|h| (0.0..=1.0).contains(&h.1)),
            "{after:?}"
        );
        assert_ne!(before, after, "{query}: the re-rank changed no score");
    }
}

/// The hits of a tool result: (path, score), best first.
fn scored_hits(result: &Value) -> Vec<(String, f64)> {
    result["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits: {result}"))
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_owned(),
                h["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// `repo-search mcp` on `root`, after its handshake, finding a model only where `model` says.
fn mcp_server(root: &Path, model: Option<&Path>, cache: &Path) -> McpServer {
    McpServer::spawn_command(command(model, cache).args(["mcp", "--root"]).arg(root)).handshake()
}

/// With `--rerank=kept`, `repo-search index` keeps MiniLM's vector of every chunk of a small
/// repository, and `semantic` then re-ranks: the `--rerank` answer, not the built-in one. Until
/// then a search says so. The default re-ranks nothing, kept vectors or not.
#[test]
fn with_rerank_kept_index_keeps_vectors_and_semantic_then_reranks() {
    let dir = functions();
    let model = model_dir();
    let query = "open a network connection";
    let hint = "run `repo-search index` once";
    let (code, _, stderr) =
        semantic_search_with(dir.path(), Some(&model), query, &["--rerank=kept"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains(hint), "no hint: {stderr}");
    let (code, _, stderr) = semantic_search(dir.path(), Some(&model), query);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains(hint), "a hint by default: {stderr}");
    let cache = tempfile::tempdir().unwrap();
    let out = command(Some(&model), cache.path())
        .args(["index", "--rerank=kept", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("kept MiniLM vectors of 4 of 4 chunks (4 computed"),
        "{stderr}"
    );
    let ask = |more: &[&str]| {
        let (code, result, stderr) = semantic_search_with(dir.path(), Some(&model), query, more);
        assert_eq!(code, 0, "{stderr}");
        assert!(
            !stderr.contains(hint),
            "a hint with every vector kept: {stderr}"
        );
        scored_hits(&result)
    };
    let kept = ask(&["--rerank=kept"]);
    assert_eq!(kept, ask(&["--rerank"]));
    assert_ne!(kept, ask(&["--rerank=never"]), "`kept` did not re-rank");
    assert_eq!(ask(&[]), ask(&["--rerank=never"]), "the default re-ranked");
}

/// A long-lived `repo-search mcp --rerank=kept` keeps the vectors itself, in the background,
/// once its first `semantic` call built the store: its answers then are the `--rerank` ones.
#[test]
fn a_long_lived_server_keeps_rerank_vectors_in_the_background() {
    let dir = functions();
    let model = model_dir();
    let cache = tempfile::tempdir().unwrap();
    let mut server = McpServer::spawn_command(
        command(Some(&model), cache.path())
            .args(["mcp", "--rerank=kept", "--root"])
            .arg(dir.path()),
    )
    .handshake();
    let query = "open a network connection";
    let mut ask = || {
        let result = server.call(json!({ "query": query, "mode": "semantic" }));
        scored_hits(&result["structuredContent"])
    };
    let first = ask();
    wait_for_kept_vectors(dir.path());
    let later = ask();
    drop(server);
    let (_, reranked, _) = semantic_search_with(dir.path(), Some(&model), query, &["--rerank"]);
    assert_eq!(later, scored_hits(&reranked));
    assert_ne!(
        first, later,
        "the server did not re-rank once the vectors were kept"
    );
}

/// Waits until the vectors log of [`functions`]' store holds every chunk's vector.
fn wait_for_kept_vectors(root: &Path) {
    // Four chunks: a header, then four records of a marker, a hash, 384 half floats and a CRC.
    let log = root.join(".git/repo-search/semantic-rerank.vectors");
    let full = 40 + 4 * (4 + 16 + 2 * 384 + 4);
    let waited = std::time::Instant::now();
    while std::fs::metadata(&log).map_or(0, |m| m.len()) < full {
        assert!(
            waited.elapsed() < support::LIMIT,
            "no vectors kept in the background"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A long-lived `mcp --rerank=kept` whose first `semantic` call is refused while the store is
/// built still keeps the vectors of that build, with no call after it: the catch-up that outlasted
/// its call wakes the thread that keeps them.
#[test]
fn a_build_that_outlasts_its_call_still_gets_its_rerank_vectors_kept() {
    let dir = functions();
    let model = model_dir();
    let cache = tempfile::tempdir().unwrap();
    let mut server = McpServer::spawn_command(
        command(Some(&model), cache.path())
            .args(["mcp", "--rerank=kept", "--deadline-ms", "1", "--root"])
            .arg(dir.path()),
    )
    .handshake();
    let refused = server.call(json!({ "query": "open a network connection", "mode": "semantic" }));
    assert_eq!(
        support::tool_error(&refused)["code"],
        "ERR_PRISM_INDEX_STALE",
        "{refused}"
    );
    wait_for_kept_vectors(dir.path());
}

/// A long-lived server does not hold a `semantic` call past its deadline while the store is first
/// built: the call is refused as an index that is `building` (`STALE`, which says to retry), and
/// the build goes on in the server after it. An agent's MCP client gives up on a call long before
/// a large tree's first build ends (the TypeScript SDK after 60 s).
#[test]
fn a_long_lived_server_refuses_a_call_past_its_deadline_while_the_store_is_built_and_builds_on() {
    let dir = functions();
    // Enough code that no build of the store fits in the deadline of 1 ms.
    for i in 0..300 {
        write(
            dir.path(),
            &format!("src/handlers/h{i}.py"),
            &format!(
                "def handle_{i}(request):\n    total = request.count * {i}\n    return total\n"
            ),
        );
    }
    let cache = tempfile::tempdir().unwrap();
    let mut server = McpServer::spawn_command(
        command(None, cache.path())
            .args(["mcp", "--deadline-ms", "1", "--root"])
            .arg(dir.path()),
    )
    .handshake();
    let query = "open a network connection";
    let refused = server.call(json!({ "query": query, "mode": "semantic" }));
    let error = support::tool_error(&refused);
    assert_eq!(error["code"], "ERR_PRISM_INDEX_STALE", "{refused}");
    assert!(
        error["message"].as_str().unwrap().contains("building"),
        "{refused}"
    );
    // The store's manifest is committed at the end of its build, by the server alone.
    let manifest = dir.path().join(".git/repo-search/semantic/MANIFEST");
    let waited = std::time::Instant::now();
    while !manifest.is_file() {
        assert!(
            waited.elapsed() < support::LIMIT,
            "the server did not go on building the store"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(server);
    let (code, result, stderr) = semantic_search(dir.path(), None, query);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(result["hits"][0]["path"], "src/net.py", "{result}");
}

/// `--rerank` without MiniLM in the model directory is refused, with the command that installs
/// it.
#[test]
fn rerank_without_minilm_is_unsupported_and_says_how_to_install_it() {
    let dir = functions();
    let installed = model_dir();
    let statics_only = tempfile::tempdir().unwrap();
    for f in ["static-256.bin", "static-256.bin.sha256", "tokenizer.json"] {
        std::fs::copy(installed.join(f), statics_only.path().join(f)).unwrap();
    }
    let (code, result, stderr) = semantic_search_with(
        dir.path(),
        Some(statics_only.path()),
        "order a list of numbers",
        &["--rerank"],
    );
    assert_eq!(code, 2, "{result}");
    assert_eq!(result["code"], "ERR_PRISM_INDEX_UNSUPPORTED", "{result}");
    assert!(
        stderr.contains("--rerank") && stderr.contains("repo-search model install"),
        "{stderr}"
    );
    // Without --rerank the same directory serves `semantic`.
    let (code, result, _) = semantic_search(
        dir.path(),
        Some(statics_only.path()),
        "order a list of numbers",
    );
    assert_eq!(code, 0, "{result}");
}

/// A model directory whose static model is not whole (its checksum or MiniLM's tokenizer gone) is
/// refused with the missing file's name and what to do, never passed over for the built-in model:
/// the user named that model.
#[test]
fn a_static_model_that_is_not_whole_is_refused_naming_the_missing_file() {
    let dir = functions();
    for missing in ["static-256.bin.sha256", "tokenizer.json", "static-256.bin"] {
        let model = model_copy();
        std::fs::remove_file(model.path().join(missing)).unwrap();
        let (code, result, stderr) =
            semantic_search(dir.path(), Some(model.path()), "order a list of numbers");
        assert_eq!(code, 2, "{missing}: {result}");
        assert_eq!(result["code"], "ERR_PRISM_INDEX_UNSUPPORTED", "{result}");
        assert!(
            result["message"]
                .as_str()
                .unwrap()
                .contains(&format!("`{missing}` is missing")),
            "{missing}: {result}"
        );
        assert!(stderr.contains("built-in static model"), "{stderr}");
    }
}

/// The `mode` enum of `tools/list` from `repo-search mcp` finding a model only where `model`
/// says.
fn mcp_modes(root: &Path, model: Option<&Path>) -> Vec<String> {
    let cache = tempfile::tempdir().unwrap();
    let listed = mcp_server(root, model, cache.path()).request("tools/list", json!({}));
    listed["result"]["tools"][0]["inputSchema"]["properties"]["mode"]["enum"]
        .as_array()
        .expect("a mode enum")
        .iter()
        .map(|m| m.as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn mcp_offers_semantic_with_no_model_installed() {
    let dir = functions();
    for model in [None, Some(model_dir())] {
        assert_eq!(
            mcp_modes(dir.path(), model.as_deref()),
            ["literal", "indexed_literal", "semantic"],
            "{model:?}"
        );
    }
}

/// A copy of the installed model directory (static model and MiniLM), for a test to damage.
fn model_copy() -> tempfile::TempDir {
    let installed = model_dir();
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&installed).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
        }
    }
    copy
}

/// A static model header whose width is 2^32 - 1 (`vocab x dim` then overflows): it used to pass
/// the loader, and every process that loaded it aborted allocating 16 GiB.
fn damage_static_header(dir: &Path) {
    let mut header = b"RSSTATIC".to_vec();
    for v in [1u32, u32::MAX, u32::MAX] {
        header.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(dir.join("static-256.bin"), header).unwrap();
}

#[test]
fn a_damaged_static_model_is_named_with_how_to_reinstall_it_not_called_missing() {
    let dir = functions();
    let model = model_copy();
    damage_static_header(model.path());
    let (code, result, stderr) =
        semantic_search(dir.path(), Some(model.path()), "order a list of numbers");
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(result["code"], "ERR_PRISM_INDEX_UNSUPPORTED", "{result}");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains("`static-256.bin` cannot be used") && !message.contains("not installed"),
        "{message}"
    );
    assert!(
        stderr.contains("hint: reinstall the model") && stderr.contains("cargo xtask model static"),
        "{stderr}"
    );
    // The other modes are served with the same model directory.
    let cache = tempfile::tempdir().unwrap();
    let out = command(Some(model.path()), cache.path())
        .args(["search", "bubble_sort", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn damaged_minilm_weights_are_named_not_called_missing() {
    let dir = functions();
    let model = model_copy();
    // A safetensors header that claims more bytes than the file has.
    let mut weights = (u64::MAX / 2).to_le_bytes().to_vec();
    weights.extend_from_slice(b"{}");
    std::fs::write(model.path().join("model.safetensors"), weights).unwrap();
    let (code, result, stderr) = semantic_search_with(
        dir.path(),
        Some(model.path()),
        "order a list of numbers",
        &["--rerank"],
    );
    assert_eq!(code, 2, "{stderr}");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains("`model.safetensors` cannot be used")
            && !message.contains("not beside the static model"),
        "{message}"
    );
    assert!(stderr.contains("hint: reinstall the model"), "{stderr}");
    // Without --rerank the static model still serves `semantic` (the hybrid ranking).
    let (code, result, _) = semantic_search_with(
        dir.path(),
        Some(model.path()),
        "order a list of numbers",
        &["--rerank=never"],
    );
    assert_eq!(code, 0, "{result}");
}

#[test]
fn a_server_with_a_damaged_model_survives_and_serves_the_other_modes() {
    let dir = functions();
    let model = model_copy();
    damage_static_header(model.path());
    let cache = tempfile::tempdir().unwrap();
    let mut server = mcp_server(dir.path(), Some(model.path()), cache.path());
    let listed = server.request("tools/list", json!({}));
    assert_eq!(
        listed["result"]["tools"][0]["inputSchema"]["properties"]["mode"]["enum"],
        json!(["literal", "indexed_literal"])
    );
    for mode in ["literal", "indexed_literal"] {
        let result = server.call(json!({ "query": "bubble_sort", "mode": mode }));
        assert_eq!(result["isError"], false, "{mode}: {result}");
    }
    let refused = server.call(json!({ "query": "sort numbers", "mode": "semantic" }));
    assert_eq!(
        support::tool_error(&refused)["code"],
        "ERR_PRISM_INDEX_UNSUPPORTED"
    );
    server.assert_serving();
}
