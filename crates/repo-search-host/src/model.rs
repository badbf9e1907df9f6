//! Where the semantic mode's models are looked for: `--model-dir`, else `REPO_SEARCH_MODEL_DIR`,
//! else the user's cache directory. The engine itself lives in `semantic_index`; its static model
//! is built in, so `semantic` needs no directory at all.

use std::path::{Path, PathBuf};

/// The environment variable naming the model directory when `--model-dir` is not given.
pub const MODEL_DIR_ENV: &str = "REPO_SEARCH_MODEL_DIR";

/// The model directory's name under the per-user cache directory.
const MODEL_NAME: &str = "all-minilm-l6-v2";

/// The model directory: `--model-dir` when given (and nowhere else then), else the
/// [`MODEL_DIR_ENV`] directory, else `$XDG_CACHE_HOME/repo-search/models/all-minilm-l6-v2` (or
/// `~/.cache/...`), where `repo-search model install` puts MiniLM.
///
/// The directory need not exist. `semantic` uses the static model it holds when it holds one,
/// else the built-in one, and MiniLM re-ranks only when MiniLM is there. `None` when no directory
/// is named and there is no cache directory (neither `XDG_CACHE_HOME` nor `HOME` is set):
/// `semantic` then runs on the built-in model alone.
pub fn model_dir(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(d) = flag {
        return Some(d.to_path_buf());
    }
    if let Some(d) = std::env::var_os(MODEL_DIR_ENV).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(d));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(cache.join("repo-search/models").join(MODEL_NAME))
}
