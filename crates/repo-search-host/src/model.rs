//! Where the semantic mode's model is: `--model-dir`, else `REPO_SEARCH_MODEL_DIR`, else the
//! user's cache directory. The engine itself lives in `semantic_index`.

use std::path::{Path, PathBuf};

/// The environment variable naming the model directory when `--model-dir` is not given.
pub const MODEL_DIR_ENV: &str = "REPO_SEARCH_MODEL_DIR";

/// The model directory's name under the per-user cache directory.
const MODEL_NAME: &str = "all-minilm-l6-v2";

/// The files a model directory must hold for the semantic backend: the static model, its
/// checksum and the tokenizer.
fn holds_model(dir: &Path) -> bool {
    [
        semantic_index::STATIC_FILE.to_owned(),
        format!("{}.sha256", semantic_index::STATIC_FILE),
        "tokenizer.json".to_owned(),
    ]
    .iter()
    .all(|f| dir.join(f).is_file())
}

/// Where the model is: `--model-dir` when given (and nowhere else then), else the
/// [`MODEL_DIR_ENV`] directory, else `$XDG_CACHE_HOME/repo-search/models/all-minilm-l6-v2` (or
/// `~/.cache/...`). `None` when the chosen directory does not hold the static model.
pub fn find_model(flag: Option<&Path>) -> Option<PathBuf> {
    let chosen = match flag {
        Some(d) => d.to_path_buf(),
        None => match std::env::var_os(MODEL_DIR_ENV).filter(|v| !v.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
                .join("repo-search/models")
                .join(MODEL_NAME),
        },
    };
    holds_model(&chosen).then_some(chosen)
}
