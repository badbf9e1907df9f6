//! What the semantic tests share: the installed model (`cargo xtask tools`; the tests fail, they
//! do not skip, when it is missing) and a static model over its vocabulary's first 3 000 tokens
//! (common English words are among them), which builds in seconds.

use std::path::PathBuf;
use std::sync::OnceLock;

use semantic_index::{MiniLm, StaticModel};

/// Tokens the test static model gives a vector; the full build is `cargo xtask model static`.
pub const LIMIT: usize = 3000;

/// The installed MiniLM directory.
pub fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/models/all-minilm-l6-v2")
}

/// MiniLM, loaded once per test binary.
pub fn minilm() -> &'static MiniLm {
    static MODEL: OnceLock<MiniLm> = OnceLock::new();
    MODEL.get_or_init(|| {
        MiniLm::load(&model_dir())
            .unwrap_or_else(|e| panic!("{e}: run `cargo xtask tools` to install the model"))
    })
}

/// The static model over [`LIMIT`] tokens, built once per test binary.
pub fn statics() -> &'static StaticModel {
    static MODEL: OnceLock<StaticModel> = OnceLock::new();
    MODEL.get_or_init(|| StaticModel::build_limited(minilm(), &model_dir(), LIMIT).expect("builds"))
}
