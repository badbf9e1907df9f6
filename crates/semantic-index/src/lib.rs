//! The host's semantic search: MiniLM inference, a static model distilled from it, chunks, and a
//! hybrid ranking re-ranked by MiniLM.
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
//! - **Model files are untrusted input**: [`StaticHeader`], [`BertConfig`] and [`Safetensors`]
//!   check every size a header states, against the file's length and the sizes this code
//!   supports, before anything is allocated for it. A bad file is [`Error::Invalid`], naming the
//!   file and the [`Defect`]; an absent one is [`Error::Missing`].
//!
//! Every weight is a documented constant in [`rank`]; docs/semantic-design.md has the evaluation.
//! Nothing here downloads anything: the static model is built in (`StaticModel::builtin`), and
//! MiniLM comes from `cargo xtask tools`.

use std::path::PathBuf;

mod backend;
mod bm25;
mod chunk;
mod engine;
mod model;
mod model_file;
mod prose;
pub mod rank;
mod reranker;
mod segment;
mod statics;
mod store;
mod text;
mod variants;
mod vector_log;

pub use backend::CompositeBackend;
pub use chunk::{Chunk, TARGET_BYTES, chunk_file, searched_text};
pub use engine::SemanticEngine;
pub use model::{MAX_POSITIONS, MiniLm, normalize};
pub use model_file::{
    BertConfig, Defect, MAX_CHECKSUM_BYTES, MAX_CONFIG_BYTES, MAX_HEADS, MAX_HIDDEN,
    MAX_INTERMEDIATE, MAX_LAYERS, MAX_POSITION_EMBEDDINGS, MAX_SAFETENSORS_HEADER,
    MAX_STATIC_BYTES, MAX_TOKENIZER_BYTES, MAX_TYPE_VOCAB, MAX_VOCAB, MAX_WEIGHTS_BYTES, Precision,
    STATIC_HEADER, Safetensors, StaticHeader, TensorInfo,
};
pub use rank::{Document, Hit, Scorer, SemanticIndex};
pub use reranker::{KEPT_CHUNKS_LIMIT, KEPT_COVERAGE, KeptVectors, RerankPolicy};
pub use segment::HASH_BYTES;
pub use statics::{
    BUILTIN_FILE, BUILTIN_SHA256, STATIC_DIM, STATIC_FILE, StaticModel, TUNED_FILE, TuneSettings,
    installed_file,
};
pub use store::{
    CatchUp, IDF_SAMPLE_FILES, MAX_ANSWER_FILES, MAX_FILE_BYTES, PRIOR_WEIGHT, RELATIVE_FLOOR,
    SourceFile, Store, StoreError, StoreHit, model_id, version_of,
};
pub use text::{for_embedding, identifier_words, sub_tokens};
pub use vector_log::{Appended, ChunkHash, VectorLog, kept};

/// Why a model could not be loaded, built or stored.
///
/// A host tells a model that is not installed ([`Error::Missing`]) from one that is there but
/// cannot be used ([`Error::Invalid`], [`Error::Read`]): see [`Error::is_missing`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file the model needs is not in its directory: the model is not installed, or not whole.
    #[error("{} is missing", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// A model file is there but could not be read (permissions, I/O).
    #[error("could not read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A model file is there but is not a valid one: damaged, cut short, of another format, or of
    /// sizes this version does not support. Nothing was allocated for what its header asked.
    #[error("{} is not a valid model file: {defect}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it, in fixed words.
        defect: Defect,
    },
    /// A file could not be written.
    #[error("could not write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The tokenizer failed on a text.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
}

impl Error {
    /// Whether the model is simply not installed (a file it needs is absent), rather than
    /// installed and unusable.
    pub fn is_missing(&self) -> bool {
        matches!(self, Error::Missing { .. })
    }

    /// The name of the file that is absent, when that is the error.
    pub fn missing_file(&self) -> Option<String> {
        match self {
            Error::Missing { path } => path.file_name().map(|n| n.to_string_lossy().into_owned()),
            _ => None,
        }
    }
}
