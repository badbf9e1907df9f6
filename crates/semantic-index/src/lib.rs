//! The host's semantic search, first slice (issue 15): MiniLM inference, a static model distilled
//! from it, chunks, and a hybrid ranking re-ranked by MiniLM.
//!
//! - **[`MiniLm`]**: all-MiniLM-L6-v2 (or any BERT sentence-transformer directory with
//!   `model.safetensors` and `tokenizer.json`), run by a small forward pass of our own; mean
//!   pooling and L2 normalisation as sentence-transformers does.
//! - **[`StaticModel`]**: the model2vec method: every vocabulary token embedded through MiniLM,
//!   PCA to 256 dimensions, SIF weighting. Built deterministically by `semantic-index static`,
//!   stored next to the model with its sha256.
//! - **[`chunk_file`]**: chunks of about 1500 bytes along the tree-sitter syntax tree (Rust,
//!   Python, C/C++, Go, JS/TS, Java) or by line merging, each with its path, line range, content
//!   hash and the names it defines.
//! - **[`SemanticIndex`]**: BM25 over identifier sub-tokens, a brute-force int8 cosine scan of
//!   the static vectors, definition and file-name boosts, one result per file, then MiniLM
//!   re-ranks the first candidates, caching chunk vectors by content hash.
//!
//! - **[`VectorLog`]**: the re-rank's MiniLM chunk vectors, kept in a file for the next process.
//!
//! Every weight is a documented constant in [`rank`]; docs/semantic.md has the evaluation.
//! Nothing here downloads anything: the model comes from `cargo xtask tools`.

use std::path::PathBuf;

mod bm25;
mod chunk;
mod model;
pub mod rank;
mod segment;
mod statics;
mod store;
mod text;
mod vector_log;

pub use chunk::{Chunk, TARGET_BYTES, chunk_file, searched_text};
pub use model::{MAX_POSITIONS, MiniLm, normalize};
pub use rank::{Document, Hit, Scorer, SemanticIndex};
pub use segment::HASH_BYTES;
pub use statics::{STATIC_DIM, STATIC_FILE, StaticModel, TUNED_FILE, TuneSettings, preferred_file};
pub use store::{
    CatchUp, IDF_SAMPLE_FILES, MAX_ANSWER_FILES, MAX_FILE_BYTES, PRIOR_WEIGHT, RELATIVE_FLOOR,
    SourceFile, Store, StoreError, StoreHit, model_id, version_of,
};
pub use text::{for_embedding, identifier_words, sub_tokens};
pub use vector_log::{Appended, ChunkHash, VectorLog, kept};

/// Why a model could not be loaded, built or stored.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A model file could not be read.
    #[error("could not read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("could not write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// `config.json` lacks a field the encoder needs, or is not JSON.
    #[error("bad model config: {0}")]
    Config(String),
    /// `model.safetensors` is malformed or lacks a tensor.
    #[error("bad model weights: {0}")]
    Weights(String),
    /// `tokenizer.json` could not be loaded, configured or applied.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The static model's file is malformed.
    #[error("bad static model: {0}")]
    StaticFormat(String),
    /// The static model's file does not match the checksum written beside it.
    #[error("{0} does not match its sha256")]
    Checksum(PathBuf),
}
