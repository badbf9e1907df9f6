//! The model's files as untrusted input: their size limits, and the checks of every header field
//! made before anything is allocated for it.
//!
//! A model directory is written by a tool, copied by hand, or damaged on disk. Whatever its files
//! hold, loading them ends in a model or in an [`Error`] naming the file and, in fixed words
//! ([`Defect`]), what is wrong with it: never a panic, an abort or an allocation a header asked
//! for. Every size a header states is checked with checked arithmetic against the file's length
//! and against the sizes this code supports (the constants below) before a buffer is made for it.
//!
//! The parsers here take bytes and lengths only, so that the fuzz target `model_headers` runs
//! them as the loaders do.

use std::fs::File;
use std::path::Path;

use crate::Error;
use crate::statics::STATIC_DIM;

/// The most tokens a vocabulary may hold (the static model's rows, MiniLM's word embeddings, the
/// IDF table): a quarter of a million, above the multilingual tokenizers' 250 002.
pub const MAX_VOCAB: usize = 1 << 18;
/// The widest hidden size MiniLM's config may state.
pub const MAX_HIDDEN: usize = 4096;
/// The most attention heads.
pub const MAX_HEADS: usize = 64;
/// The most encoder layers.
pub const MAX_LAYERS: usize = 48;
/// The widest feed-forward layer.
pub const MAX_INTERMEDIATE: usize = 16_384;
/// The most position embeddings (inputs are cut at [`crate::MAX_POSITIONS`] anyway).
pub const MAX_POSITION_EMBEDDINGS: usize = 8192;
/// The most token types.
pub const MAX_TYPE_VOCAB: usize = 16;
/// The largest `config.json` and `sentence_bert_config.json`.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The largest `tokenizer.json` (a 250 000-token one is about 17 MB).
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;
/// The largest `model.safetensors` (BERT-large is 1.3 GB).
pub const MAX_WEIGHTS_BYTES: u64 = 2 << 30;
/// The largest safetensors JSON header (the format's own reader stops at 100 MB; MiniLM's is 15 KB).
pub const MAX_SAFETENSORS_HEADER: u64 = 16 << 20;
/// The largest `.sha256` file beside a static model (64 hex digits and a newline).
pub const MAX_CHECKSUM_BYTES: u64 = 1024;
/// The static model's header: magic, version, vocabulary size and width (u32 each).
pub const STATIC_HEADER: usize = 20;
/// The static model's magic, for rows of f32s.
const STATIC_MAGIC: &[u8; 8] = b"RSSTATIC";
/// The static model's magic, for rows of int8s with one f32 scale per row ([`Precision::Int8`]).
const INT8_MAGIC: &[u8; 8] = b"RSSTATI8";
/// The static model format this version reads and writes.
pub(crate) const STATIC_VERSION: u32 = 1;
/// The largest static model file: the header and [`MAX_VOCAB`] rows of [`STATIC_DIM`] f32s (an
/// int8 model is smaller).
pub const MAX_STATIC_BYTES: u64 = STATIC_HEADER as u64 + (MAX_VOCAB * STATIC_DIM * 4) as u64;

/// What is wrong with a model file, in fixed words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Defect {
    /// Something other than a regular file is in its place (a directory, a FIFO, a device).
    #[error("it is not a regular file")]
    NotAFile,
    /// It is larger than any valid file of its kind.
    #[error("it is larger than any valid file of its kind")]
    TooLarge,
    /// It changed while it was read.
    #[error("it changed while it was read")]
    Changed,
    /// Its bytes do not match the sha256 written beside it.
    #[error("it does not match the sha256 written beside it")]
    ChecksumMismatch,
    /// The `.sha256` file does not hold a sha256 in hex.
    #[error("it does not hold a sha256")]
    NotAChecksum,
    /// Its magic or version is not this version's.
    #[error("it is not a file of the format and version this version reads")]
    WrongFormat,
    /// It ends inside its header.
    #[error("it is shorter than its header")]
    Truncated,
    /// The static model's vector width is not [`STATIC_DIM`].
    #[error("its vector width is not the 256 this version reads")]
    UnsupportedWidth,
    /// The vocabulary is empty or larger than [`MAX_VOCAB`].
    #[error("its vocabulary is empty or larger than this version supports")]
    VocabularyOutOfRange,
    /// The file's length is not the one the sizes in its header give.
    #[error("its length does not match the sizes its header gives")]
    LengthMismatch,
    /// It is not a JSON object.
    #[error("it is not a JSON object")]
    NotJson,
    /// A field the encoder needs is absent or not a whole number.
    #[error("it lacks `{0}`, or `{0}` is not a whole number")]
    MissingField(&'static str),
    /// A field is outside the sizes this version supports.
    #[error("`{0}` is outside the sizes this version supports")]
    OutOfRange(&'static str),
    /// The hidden size is not a multiple of the attention heads.
    #[error("its hidden size is not a multiple of its attention heads")]
    HeadsDoNotDivideHidden,
    /// The safetensors header's length is larger than the format allows or than the file.
    #[error("its header is longer than the file or than this version reads")]
    HeaderTooLarge,
    /// A tensor's entry lacks a dtype, a shape or byte offsets, or they are not of their types.
    #[error("a tensor's entry lacks a dtype, a shape or byte offsets")]
    BadTensorEntry,
    /// A tensor's byte range does not hold exactly its shape's elements.
    #[error("a tensor's bytes do not match its shape")]
    TensorSizeMismatch,
    /// The tensors' byte ranges overlap, leave a gap, or do not end with the file.
    #[error("its tensors do not cover its data exactly once")]
    TensorsNotContiguous,
    /// A tensor the encoder needs is absent, or not of F32.
    #[error("it lacks a float32 tensor the encoder needs")]
    MissingTensor,
    /// A tensor's shape is not the one `config.json` gives.
    #[error("a tensor's shape does not match config.json")]
    TensorShape,
    /// It is not a tokenizer the `tokenizers` crate reads.
    #[error("it is not a tokenizer this version reads")]
    NotATokenizer,
    /// The tokenizer lacks the `[CLS]` or `[SEP]` token.
    #[error("it lacks the [CLS] or [SEP] token")]
    NoSpecialTokens,
}

/// The error for `path` having `defect`.
pub(crate) fn invalid(path: &Path, defect: Defect) -> Error {
    Error::Invalid {
        path: path.to_path_buf(),
        defect,
    }
}

/// Opens a model file and returns it with its length, when that is at most `max`. A file that
/// is not there is [`Error::Missing`]; something other than a regular file, or a larger one, is
/// [`Error::Invalid`] before a byte is read. Symlinks are followed: a model directory may be a
/// cache of links to blobs, and the model is not the index.
pub(crate) fn open(path: &Path, max: u64) -> Result<(File, u64), Error> {
    let io = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => Error::Missing {
            path: path.to_path_buf(),
        },
        _ => Error::Read {
            path: path.to_path_buf(),
            source,
        },
    };
    // Checked before the open, which would wait on a FIFO.
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(invalid(path, Defect::NotAFile));
    }
    let file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(invalid(path, Defect::NotAFile));
    }
    if meta.len() > max {
        return Err(invalid(path, Defect::TooLarge));
    }
    Ok((file, meta.len()))
}

/// Reads a model file whole when it holds at most `max` bytes (see [`open`]).
pub(crate) fn read(path: &Path, max: u64) -> Result<Vec<u8>, Error> {
    let (file, _) = open(path, max)?;
    search_profile::read_bounded(&file, max).map_err(|source| match source.kind() {
        std::io::ErrorKind::FileTooLarge => invalid(path, Defect::TooLarge),
        std::io::ErrorKind::InvalidData => invalid(path, Defect::Changed),
        _ => Error::Read {
            path: path.to_path_buf(),
            source,
        },
    })
}

/// Reads `count` little-endian f32s at byte `offset` of `file`, through one small buffer. The
/// caller has checked that they lie inside the file.
pub(crate) fn read_f32s(file: &File, offset: u64, count: usize) -> std::io::Result<Vec<f32>> {
    use std::io::{Read as _, Seek as _};
    let mut reader = file;
    reader.seek(std::io::SeekFrom::Start(offset))?;
    let mut out = Vec::with_capacity(count);
    let mut buffer = vec![0u8; (count * 4).min(search_profile::CHUNK_BYTES)];
    while out.len() < count {
        let want = ((count - out.len()) * 4).min(buffer.len());
        reader.read_exact(&mut buffer[..want])?;
        out.extend(
            buffer[..want]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
    }
    Ok(out)
}

/// How a static model's rows are stored, as its magic says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// `vocab × dim` little-endian f32s.
    F32,
    /// `vocab` little-endian f32 scales, then `vocab × dim` int8s: a row is its int8s times its
    /// scale. The built-in model is stored so, at a quarter of the size.
    Int8,
}

impl Precision {
    /// The bytes of `vocab` rows `dim` wide after the header, `None` on overflow.
    fn data_bytes(self, vocab: u64, dim: u64) -> Option<u64> {
        let cells = vocab.checked_mul(dim)?;
        match self {
            Precision::F32 => cells.checked_mul(4),
            Precision::Int8 => cells.checked_add(vocab.checked_mul(4)?),
        }
    }
}

/// The static model's header, checked against the file's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticHeader {
    /// Rows: one per vocabulary token, in `1..=MAX_VOCAB`.
    pub vocab: usize,
    /// The vector width: [`STATIC_DIM`].
    pub dim: usize,
    /// How the rows are stored.
    pub precision: Precision,
}

impl StaticHeader {
    /// The header at the start of `bytes` (at least [`STATIC_HEADER`] of the file's first
    /// bytes) of a file of `file_len` bytes: a magic and version this version writes, a width
    /// of [`STATIC_DIM`], a vocabulary of 1 to [`MAX_VOCAB`] tokens, and exactly the bytes of
    /// `vocab` rows in the magic's [`Precision`] after the header.
    pub fn parse(bytes: &[u8], file_len: u64) -> Result<StaticHeader, Defect> {
        let header = bytes.get(..STATIC_HEADER).ok_or(Defect::Truncated)?;
        let word =
            |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        let precision = match &header[..8] {
            m if m == STATIC_MAGIC => Precision::F32,
            m if m == INT8_MAGIC => Precision::Int8,
            _ => return Err(Defect::WrongFormat),
        };
        if word(8) != STATIC_VERSION {
            return Err(Defect::WrongFormat);
        }
        let (vocab, dim) = (word(12) as usize, word(16) as usize);
        if dim != STATIC_DIM {
            return Err(Defect::UnsupportedWidth);
        }
        if !(1..=MAX_VOCAB).contains(&vocab) {
            return Err(Defect::VocabularyOutOfRange);
        }
        let expected = precision
            .data_bytes(vocab as u64, dim as u64)
            .and_then(|n| n.checked_add(STATIC_HEADER as u64));
        if expected != Some(file_len) {
            return Err(Defect::LengthMismatch);
        }
        Ok(StaticHeader {
            vocab,
            dim,
            precision,
        })
    }

    /// The header's bytes.
    pub(crate) fn encode(&self) -> [u8; STATIC_HEADER] {
        let mut out = [0u8; STATIC_HEADER];
        out[..8].copy_from_slice(match self.precision {
            Precision::F32 => STATIC_MAGIC,
            Precision::Int8 => INT8_MAGIC,
        });
        out[8..12].copy_from_slice(&STATIC_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&(self.vocab as u32).to_le_bytes());
        out[16..20].copy_from_slice(&(self.dim as u32).to_le_bytes());
        out
    }
}

/// What MiniLM's encoder needs from `config.json`, each within the sizes this version supports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BertConfig {
    /// `hidden_size`: the vectors' width, in `1..=MAX_HIDDEN`, a multiple of `heads`.
    pub hidden: usize,
    /// `num_attention_heads`, in `1..=MAX_HEADS`.
    pub heads: usize,
    /// `num_hidden_layers`, in `1..=MAX_LAYERS`.
    pub layers: usize,
    /// `intermediate_size`, in `1..=MAX_INTERMEDIATE`.
    pub intermediate: usize,
    /// `vocab_size`, in `1..=MAX_VOCAB`.
    pub vocab: usize,
    /// `max_position_embeddings`, in `2..=MAX_POSITION_EMBEDDINGS`.
    pub positions: usize,
    /// `type_vocab_size` (2 when absent), in `1..=MAX_TYPE_VOCAB`.
    pub types: usize,
    /// `layer_norm_eps` (1e-12 when absent), positive and below 1.
    pub layer_norm_eps: f32,
}

impl BertConfig {
    /// Parses and checks `config.json`.
    pub fn parse(bytes: &[u8]) -> Result<BertConfig, Defect> {
        let config: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(bytes).map_err(|_| Defect::NotJson)?;
        let size = |name: &'static str, range: std::ops::RangeInclusive<usize>| {
            let v = config
                .get(name)
                .and_then(serde_json::Value::as_u64)
                .ok_or(Defect::MissingField(name))?;
            usize::try_from(v)
                .ok()
                .filter(|v| range.contains(v))
                .ok_or(Defect::OutOfRange(name))
        };
        let hidden = size("hidden_size", 1..=MAX_HIDDEN)?;
        let heads = size("num_attention_heads", 1..=MAX_HEADS)?;
        let layers = size("num_hidden_layers", 1..=MAX_LAYERS)?;
        let intermediate = size("intermediate_size", 1..=MAX_INTERMEDIATE)?;
        let vocab = size("vocab_size", 1..=MAX_VOCAB)?;
        let positions = size("max_position_embeddings", 2..=MAX_POSITION_EMBEDDINGS)?;
        let types = match config.get("type_vocab_size") {
            None => 2,
            Some(_) => size("type_vocab_size", 1..=MAX_TYPE_VOCAB)?,
        };
        let layer_norm_eps = match config.get("layer_norm_eps") {
            None => 1e-12,
            Some(v) => v
                .as_f64()
                .map(|e| e as f32)
                .filter(|e| *e > 0.0 && *e < 1.0)
                .ok_or(Defect::OutOfRange("layer_norm_eps"))?,
        };
        if !hidden.is_multiple_of(heads) {
            return Err(Defect::HeadsDoNotDivideHidden);
        }
        Ok(BertConfig {
            hidden,
            heads,
            layers,
            intermediate,
            vocab,
            positions,
            types,
            layer_norm_eps,
        })
    }

    /// Every F32 tensor the encoder reads, with the shape this configuration gives it.
    pub fn tensors(&self) -> Vec<(String, Vec<usize>)> {
        let (h, i) = (self.hidden, self.intermediate);
        let mut out = vec![
            (
                "embeddings.word_embeddings.weight".to_owned(),
                vec![self.vocab, h],
            ),
            (
                "embeddings.position_embeddings.weight".to_owned(),
                vec![self.positions, h],
            ),
            (
                "embeddings.token_type_embeddings.weight".to_owned(),
                vec![self.types, h],
            ),
            ("embeddings.LayerNorm.weight".to_owned(), vec![h]),
            ("embeddings.LayerNorm.bias".to_owned(), vec![h]),
        ];
        for layer in 0..self.layers {
            let p = format!("encoder.layer.{layer}");
            for (name, shape) in [
                ("attention.self.query.weight", vec![h, h]),
                ("attention.self.query.bias", vec![h]),
                ("attention.self.key.weight", vec![h, h]),
                ("attention.self.key.bias", vec![h]),
                ("attention.self.value.weight", vec![h, h]),
                ("attention.self.value.bias", vec![h]),
                ("attention.output.dense.weight", vec![h, h]),
                ("attention.output.dense.bias", vec![h]),
                ("attention.output.LayerNorm.weight", vec![h]),
                ("attention.output.LayerNorm.bias", vec![h]),
                ("intermediate.dense.weight", vec![i, h]),
                ("intermediate.dense.bias", vec![i]),
                ("output.dense.weight", vec![h, i]),
                ("output.dense.bias", vec![h]),
                ("output.LayerNorm.weight", vec![h]),
                ("output.LayerNorm.bias", vec![h]),
            ] {
                out.push((format!("{p}.{name}"), shape));
            }
        }
        out
    }
}

/// One tensor of a safetensors file, checked against the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Its dtype, as the header spells it (`F32`, `I64`, …).
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Where its bytes start in the file (past the header).
    pub offset: u64,
    /// How many bytes it holds: its shape's element count times its dtype's width.
    pub len: u64,
}

/// A safetensors file's header, checked against the file's length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Safetensors {
    /// The tensors, in the order of their bytes.
    pub tensors: Vec<TensorInfo>,
}

/// The width of a safetensors dtype, in bytes (`None`: a dtype this version does not know).
fn dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" => 1,
        "I16" | "U16" | "F16" | "BF16" => 2,
        "I32" | "U32" | "F32" => 4,
        "I64" | "U64" | "F64" => 8,
        _ => return None,
    })
}

impl Safetensors {
    /// The length of the JSON header that `first` (the file's first 8 bytes or more) announces,
    /// checked against [`MAX_SAFETENSORS_HEADER`] and against a file of `file_len` bytes.
    pub fn header_len(first: &[u8], file_len: u64) -> Result<u64, Defect> {
        let n = first.get(..8).ok_or(Defect::Truncated)?;
        let n = u64::from_le_bytes([n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]]);
        if n > MAX_SAFETENSORS_HEADER || n.checked_add(8).is_none_or(|end| end > file_len) {
            return Err(Defect::HeaderTooLarge);
        }
        Ok(n)
    }

    /// Parses the header of a file of `file_len` bytes whose first bytes are `head` (at least
    /// the 8-byte length and the JSON header it announces). Every tensor must have a known dtype,
    /// a shape whose element count times the dtype's width (checked, no overflow) is its byte
    /// range's length, and the ranges must cover the data after the header exactly once, in
    /// order, as the format requires. `__metadata__` is skipped.
    pub fn parse(head: &[u8], file_len: u64) -> Result<Safetensors, Defect> {
        let n = Self::header_len(head, file_len)?;
        let json = head.get(8..8 + n as usize).ok_or(Defect::Truncated)?;
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(json).map_err(|_| Defect::NotJson)?;
        let data_start = 8 + n;
        let data_len = file_len - data_start;
        let mut tensors = Vec::with_capacity(header.len());
        for (name, info) in header {
            if name == "__metadata__" {
                continue;
            }
            let dtype = info
                .get("dtype")
                .and_then(serde_json::Value::as_str)
                .ok_or(Defect::BadTensorEntry)?
                .to_owned();
            let width = dtype_bytes(&dtype).ok_or(Defect::BadTensorEntry)?;
            let shape = info
                .get("shape")
                .and_then(serde_json::Value::as_array)
                .ok_or(Defect::BadTensorEntry)?
                .iter()
                .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                .collect::<Option<Vec<usize>>>()
                .ok_or(Defect::BadTensorEntry)?;
            let range = info
                .get("data_offsets")
                .and_then(serde_json::Value::as_array)
                .filter(|r| r.len() == 2)
                .and_then(|r| Some((r[0].as_u64()?, r[1].as_u64()?)))
                .ok_or(Defect::BadTensorEntry)?;
            let len = shape
                .iter()
                .try_fold(width, |n, &d| n.checked_mul(d as u64))
                .ok_or(Defect::TensorSizeMismatch)?;
            if range.1.checked_sub(range.0) != Some(len) {
                return Err(Defect::TensorSizeMismatch);
            }
            tensors.push(TensorInfo {
                name,
                dtype,
                shape,
                offset: range.0,
                len,
            });
        }
        tensors.sort_by_key(|t| (t.offset, t.len));
        let mut at = 0u64;
        for t in &mut tensors {
            if t.offset != at {
                return Err(Defect::TensorsNotContiguous);
            }
            at += t.len;
            if at > data_len {
                return Err(Defect::TensorsNotContiguous);
            }
            t.offset += data_start;
        }
        if at != data_len {
            return Err(Defect::TensorsNotContiguous);
        }
        Ok(Safetensors { tensors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn static_file(vocab: u32, dim: u32) -> Vec<u8> {
        with_magic(STATIC_MAGIC, vocab, dim)
    }

    fn with_magic(magic: &[u8; 8], vocab: u32, dim: u32) -> Vec<u8> {
        let mut b = magic.to_vec();
        b.extend_from_slice(&STATIC_VERSION.to_le_bytes());
        b.extend_from_slice(&vocab.to_le_bytes());
        b.extend_from_slice(&dim.to_le_bytes());
        b
    }

    #[test]
    fn static_headers_that_overflow_or_name_another_width_are_refused() {
        let dim = STATIC_DIM as u32;
        let check = |vocab: u32, dim: u32, len: u64, expected: Result<usize, Defect>| {
            let got = StaticHeader::parse(&static_file(vocab, dim), len).map(|h| h.vocab);
            assert_eq!(got, expected, "vocab {vocab}, dim {dim}, len {len}");
        };
        check(3, dim, 20 + 3 * 1024, Ok(3));
        check(3, dim, 20 + 3 * 1024 + 1, Err(Defect::LengthMismatch));
        // The abort this guards: `dim = 2^32 − 1` passed, and a query allocated 16 GiB.
        check(0, u32::MAX, 20, Err(Defect::UnsupportedWidth));
        // `vocab × dim × 4` wrapping to the file's length.
        check(1 << 30, u32::MAX, 20, Err(Defect::UnsupportedWidth));
        check(u32::MAX, dim, 20, Err(Defect::VocabularyOutOfRange));
        check(0, dim, 20, Err(Defect::VocabularyOutOfRange));
        check(MAX_VOCAB as u32, dim, MAX_STATIC_BYTES, Ok(MAX_VOCAB));
        let mut other = static_file(3, dim);
        other[8] = 2;
        assert_eq!(
            StaticHeader::parse(&other, 20 + 3 * 1024),
            Err(Defect::WrongFormat)
        );
        assert_eq!(
            StaticHeader::parse(&other[..19], 19),
            Err(Defect::Truncated)
        );
    }

    #[test]
    fn int8_headers_count_a_scale_and_a_byte_per_cell() {
        let dim = STATIC_DIM as u32;
        let check = |vocab: u32, len: u64, expected: Result<usize, Defect>| {
            let got = StaticHeader::parse(&with_magic(INT8_MAGIC, vocab, dim), len);
            assert_eq!(got.map(|h| h.vocab), expected, "vocab {vocab}, len {len}");
        };
        check(3, 20 + 3 * 4 + 3 * 256, Ok(3));
        check(3, 20 + 3 * 1024, Err(Defect::LengthMismatch));
        check(3, 20 + 3 * 256, Err(Defect::LengthMismatch));
        check(u32::MAX, 20, Err(Defect::VocabularyOutOfRange));
        let header = StaticHeader::parse(&with_magic(INT8_MAGIC, 3, dim), 20 + 3 * 260).unwrap();
        assert_eq!(header.precision, Precision::Int8);
        assert_eq!(header.encode().to_vec(), with_magic(INT8_MAGIC, 3, dim));
    }

    #[test]
    fn configs_outside_the_supported_sizes_are_refused() {
        let base = serde_json::json!({
            "hidden_size": 384, "num_attention_heads": 12, "num_hidden_layers": 6,
            "intermediate_size": 1536, "vocab_size": 30522, "max_position_embeddings": 512,
            "type_vocab_size": 2, "layer_norm_eps": 1e-12
        });
        let check = |field: &str, value: serde_json::Value, expected: Result<(), Defect>| {
            let mut c = base.clone();
            c[field] = value.clone();
            let got = BertConfig::parse(c.to_string().as_bytes()).map(|_| ());
            assert_eq!(got, expected, "{field} = {value}");
        };
        check("hidden_size", 384.into(), Ok(()));
        check(
            "hidden_size",
            u64::MAX.into(),
            Err(Defect::OutOfRange("hidden_size")),
        );
        check(
            "hidden_size",
            0.into(),
            Err(Defect::OutOfRange("hidden_size")),
        );
        check(
            "hidden_size",
            385.into(),
            Err(Defect::HeadsDoNotDivideHidden),
        );
        check(
            "hidden_size",
            (-1).into(),
            Err(Defect::MissingField("hidden_size")),
        );
        check(
            "hidden_size",
            "384".into(),
            Err(Defect::MissingField("hidden_size")),
        );
        check(
            "num_attention_heads",
            0.into(),
            Err(Defect::OutOfRange("num_attention_heads")),
        );
        check(
            "num_hidden_layers",
            1_000_000.into(),
            Err(Defect::OutOfRange("num_hidden_layers")),
        );
        check(
            "intermediate_size",
            (1u64 << 40).into(),
            Err(Defect::OutOfRange("intermediate_size")),
        );
        check(
            "vocab_size",
            (1u64 << 32).into(),
            Err(Defect::OutOfRange("vocab_size")),
        );
        check(
            "max_position_embeddings",
            1.into(),
            Err(Defect::OutOfRange("max_position_embeddings")),
        );
        check(
            "type_vocab_size",
            0.into(),
            Err(Defect::OutOfRange("type_vocab_size")),
        );
        check(
            "layer_norm_eps",
            (-1.0).into(),
            Err(Defect::OutOfRange("layer_norm_eps")),
        );
        assert_eq!(BertConfig::parse(b"[1]"), Err(Defect::NotJson));
        assert_eq!(
            BertConfig::parse(b"{}"),
            Err(Defect::MissingField("hidden_size"))
        );
    }

    /// A safetensors file of `header` (JSON) followed by `data` bytes.
    fn safetensors(header: &serde_json::Value, data: usize) -> Vec<u8> {
        let json = header.to_string();
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b.resize(b.len() + data, 0);
        b
    }

    #[test]
    fn safetensors_headers_are_checked_against_the_shapes_and_the_file() {
        let check = |header: serde_json::Value, data: usize, expected: Result<usize, Defect>| {
            let file = safetensors(&header, data);
            let got = Safetensors::parse(&file, file.len() as u64).map(|s| s.tensors.len());
            assert_eq!(got, expected, "{header}");
        };
        let t = |dtype: &str, shape: serde_json::Value, from: u64, to: u64| serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [from, to]});
        check(
            serde_json::json!({"a": t("F32", [2, 3].into(), 0, 24), "b": t("I64", [1].into(), 24, 32),
                "__metadata__": {"format": "pt"}}),
            32,
            Ok(2),
        );
        // A shape whose element count overflows u64, over an empty range.
        check(
            serde_json::json!({"a": t("F32", [u64::MAX, u64::MAX, 4].into(), 0, 0)}),
            0,
            Err(Defect::TensorSizeMismatch),
        );
        check(
            serde_json::json!({"a": t("F32", [2].into(), 0, 4)}),
            4,
            Err(Defect::TensorSizeMismatch),
        );
        check(
            serde_json::json!({"a": t("F32", [1].into(), 0, 4)}),
            8,
            Err(Defect::TensorsNotContiguous),
        );
        check(
            serde_json::json!({"a": t("F32", [1].into(), 4, 8)}),
            8,
            Err(Defect::TensorsNotContiguous),
        );
        check(
            serde_json::json!({"a": t("F32", [1].into(), 0, 4), "b": t("F32", [1].into(), 0, 4)}),
            4,
            Err(Defect::TensorsNotContiguous),
        );
        check(
            serde_json::json!({"a": t("F32", [1].into(), 0, 4)}),
            0,
            Err(Defect::TensorsNotContiguous),
        );
        check(
            serde_json::json!({"a": t("X99", [1].into(), 0, 4)}),
            4,
            Err(Defect::BadTensorEntry),
        );
        check(
            serde_json::json!({"a": {"dtype": "F32", "shape": [1]}}),
            4,
            Err(Defect::BadTensorEntry),
        );
        check(
            serde_json::json!({"a": t("F32", serde_json::json!([-1]), 0, 4)}),
            4,
            Err(Defect::BadTensorEntry),
        );
        // A header length past the file, or past what the format allows.
        let mut file = safetensors(&serde_json::json!({}), 0);
        file[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(
            Safetensors::parse(&file, file.len() as u64),
            Err(Defect::HeaderTooLarge)
        );
        file[..8].copy_from_slice(&(MAX_SAFETENSORS_HEADER + 1).to_le_bytes());
        assert_eq!(
            Safetensors::parse(&file, u64::MAX),
            Err(Defect::HeaderTooLarge)
        );
        assert_eq!(Safetensors::parse(&file[..7], 7), Err(Defect::Truncated));
    }
}
