//! The static model: one vector per vocabulary token, distilled from MiniLM by the model2vec
//! method, so that a chunk is embedded by a table look-up and a mean instead of a transformer.

use std::borrow::Cow;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use crate::Error;
use crate::chunk::TARGET_BYTES;
use crate::model::{MiniLm, load_tokenizer, normalize};
use crate::model_file::{
    self, Defect, MAX_CHECKSUM_BYTES, MAX_STATIC_BYTES, Precision, STATIC_HEADER, StaticHeader,
    invalid,
};
use crate::text::for_embedding;

/// The width of the static vectors (the PCA's output).
pub const STATIC_DIM: usize = 256;

/// The static model's file name, written next to the MiniLM files; its sha256 is in the same name
/// with `.sha256` appended.
pub const STATIC_FILE: &str = "static-256.bin";

/// The fine-tuned static model's file name ([`StaticModel::tune`]), beside [`STATIC_FILE`].
pub const TUNED_FILE: &str = "static-256-tuned.bin";

/// The built-in static model's file name, in this crate's `model` directory, where
/// `cargo xtask model static` writes it: [`STATIC_FILE`]'s model quantized to int8
/// ([`StaticModel::quantized`]).
pub const BUILTIN_FILE: &str = "static-256-int8.bin";

/// The sha256 of the built-in static model ([`BUILTIN_FILE`]): its identity, pinned here so that
/// a changed model is a changed line of code; a test checks the compiled-in bytes against it.
pub const BUILTIN_SHA256: &str = "fe965b87abbb7ff59f13527ce7ab40bfe1341f5295b7cf3b876a95c99989ec5c";

/// The built-in static model's bytes, compiled into every binary that links this crate.
static BUILTIN: &[u8] = include_bytes!("../model/static-256-int8.bin");

/// The tokenizer of the model the built-in one was distilled from (all-MiniLM-L6-v2's).
static BUILTIN_TOKENIZER: &[u8] = include_bytes!("../model/tokenizer.json");

/// The static model a host should load from `dir`, when `dir` holds one: the fine-tuned one when
/// it is there with its checksum, else [`STATIC_FILE`] when it or its checksum is there (so that a
/// damaged model is reported, not passed over). `None` when `dir` holds neither: the host then
/// uses [`StaticModel::builtin`].
pub fn installed_file(dir: &Path) -> Option<&'static str> {
    if dir.join(TUNED_FILE).is_file() && checksum_path(dir, TUNED_FILE).is_file() {
        Some(TUNED_FILE)
    } else if dir.join(STATIC_FILE).exists() || checksum_path(dir, STATIC_FILE).exists() {
        Some(STATIC_FILE)
    } else {
        None
    }
}

/// model2vec's SIF coefficient `a` in the weight `a / (a + p(token))`.
const SIF_COEFFICIENT: f64 = 1e-4;

/// A table of token vectors and the tokenizer that names them.
pub struct StaticModel {
    tokenizer: Tokenizer,
    dim: usize,
    table: Table,
    /// The sha256 of the file it was loaded from (checked against the one beside it), or of the
    /// bytes it would be saved as.
    sha256: String,
}

impl StaticModel {
    /// Distils `minilm`: each vocabulary token is embedded alone as `[CLS] token [SEP]` (mean
    /// pooled, normalised), the vectors are centred and projected on their first
    /// [`STATIC_DIM`] principal components (an exact eigendecomposition of the covariance, so
    /// there is no random seed at all), and each token's vector is scaled by its SIF weight
    /// `a / (a + p)`, `p` following Zipf's law over the vocabulary order as model2vec assumes.
    /// Special and `[unused…]` tokens get zero vectors. The result does not depend on the thread
    /// count: every step is a fixed sequence of float operations per token.
    pub fn build(minilm: &MiniLm, dir: &Path) -> Result<Self, Error> {
        Self::build_limited(minilm, dir, usize::MAX)
    }

    /// [`StaticModel::build`] over only the first `limit` tokens that get a vector (the others
    /// get zeros): a model that builds in seconds, for tests. `limit` should exceed
    /// [`STATIC_DIM`].
    pub fn build_limited(minilm: &MiniLm, dir: &Path, limit: usize) -> Result<Self, Error> {
        let tokenizer = load_tokenizer(dir, None)?;
        let vocab = minilm.vocab_size();
        let (Some(cls), Some(sep)) = (
            tokenizer.token_to_id("[CLS]"),
            tokenizer.token_to_id("[SEP]"),
        ) else {
            return Err(invalid(
                &dir.join("tokenizer.json"),
                Defect::NoSpecialTokens,
            ));
        };
        let kept: Vec<u32> = (0..vocab as u32)
            .filter(|&id| {
                tokenizer
                    .id_to_token(id)
                    .is_some_and(|t| !(t.starts_with('[') && t.ends_with(']')))
            })
            .take(limit)
            .collect();
        let seqs: Vec<Vec<u32>> = kept.iter().map(|&id| vec![cls, id, sep]).collect();
        let embedded = minilm.embed_ids(&seqs);
        let projection = Pca::fit(&embedded, STATIC_DIM);
        let mut vectors = vec![0.0f32; vocab * STATIC_DIM];
        let harmonic: f64 = (1..=kept.len()).map(|r| 1.0 / r as f64).sum();
        for (rank, (&id, v)) in kept.iter().zip(&embedded).enumerate() {
            let p = 1.0 / ((rank + 1) as f64 * harmonic);
            let weight = (SIF_COEFFICIENT / (SIF_COEFFICIENT + p)) as f32;
            let row = &mut vectors[id as usize * STATIC_DIM..][..STATIC_DIM];
            for (out, x) in row.iter_mut().zip(projection.project(v)) {
                *out = x * weight;
            }
        }
        Ok(Self::new(tokenizer, STATIC_DIM, Table::F32(vectors)))
    }

    /// The built-in static model ([`BUILTIN_FILE`], compiled in): what `semantic` uses when the
    /// model directory holds no static model of its own. Nothing is read from disk; its rows stay
    /// in the binary's bytes, so loading it costs the tokenizer's parse alone.
    pub fn builtin() -> Result<Self, Error> {
        let path = Path::new("<built-in>").join(BUILTIN_FILE);
        let path = path.as_path();
        let header =
            StaticHeader::parse(BUILTIN, BUILTIN.len() as u64).map_err(|d| invalid(path, d))?;
        let table = Table::from_data(&header, Cow::Borrowed(&BUILTIN[STATIC_HEADER..]));
        let tokenizer = crate::model::tokenizer_from_bytes(
            Path::new("<built-in>/tokenizer.json"),
            BUILTIN_TOKENIZER.to_vec(),
            None,
        )?;
        Ok(Self {
            tokenizer,
            dim: header.dim,
            table,
            sha256: BUILTIN_SHA256.to_owned(),
        })
    }

    /// The built-in model's file bytes, as compiled in.
    pub fn builtin_bytes() -> &'static [u8] {
        BUILTIN
    }

    /// The built-in model's `tokenizer.json`, as compiled in.
    pub fn builtin_tokenizer_bytes() -> &'static [u8] {
        BUILTIN_TOKENIZER
    }

    /// This model with each row stored as int8s and one scale (the row's largest magnitude over
    /// 127, each cell rounded to the nearest step): a quarter of the size, for the built-in model.
    /// Deterministic: the same f32 rows give the same bytes on every machine.
    pub fn quantized(&self) -> Self {
        let floats = self.floats();
        let mut scales = Vec::with_capacity(self.vocab_size());
        let mut cells = Vec::with_capacity(floats.len());
        for row in floats.chunks(self.dim) {
            let largest = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let scale = largest / 127.0;
            scales.push(scale);
            cells.extend(row.iter().map(|&x| {
                if scale > 0.0 {
                    (x / scale).round().clamp(-127.0, 127.0) as i8 as u8
                } else {
                    0
                }
            }));
        }
        Self::new(
            self.tokenizer.clone(),
            self.dim,
            Table::Int8 {
                scales,
                cells: Cow::Owned(cells),
            },
        )
    }

    /// The rows as f32s (an int8 table dequantized).
    fn floats(&self) -> Cow<'_, [f32]> {
        match &self.table {
            Table::F32(v) => Cow::Borrowed(v),
            Table::Int8 { scales, cells } => Cow::Owned(
                cells
                    .chunks(self.dim)
                    .zip(scales)
                    .flat_map(|(row, &scale)| row.iter().map(move |&q| f32::from(q as i8) * scale))
                    .collect(),
            ),
        }
    }

    /// A model of `table` (`dim` wide), its sha256 that of the file it saves as.
    fn new(tokenizer: Tokenizer, dim: usize, table: Table) -> Self {
        let mut model = Self {
            tokenizer,
            dim,
            table,
            sha256: String::new(),
        };
        let mut digest = Sha256::new();
        model.write_to(&mut |bytes| digest.update(bytes));
        model.sha256 = hex(&digest.finalize());
        model
    }

    /// The sha256 (hex) of the model's file: the model's identity. For a loaded model, the one
    /// its `.sha256` file records, which the file was checked against.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The vector of a text: the mean of its tokens' vectors (identifiers cut into words first,
    /// no special tokens, no truncation), normalised. All zero when no token has a vector.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        self.embed_ids(&self.token_ids(text), |_| 1.0)
    }

    /// The token ids [`StaticModel::embed`] averages.
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer
            .encode(for_embedding(text), false)
            .map(|e| e.get_ids().to_vec())
            .unwrap_or_default()
    }

    /// The normalised, `weight`-weighted sum of the tokens' vectors.
    pub fn embed_ids(&self, ids: &[u32], weight: impl Fn(u32) -> f32) -> Vec<f32> {
        let dim = self.dim;
        let mut sum = vec![0.0f32; dim];
        let rows = |id: u32| id as usize * dim..(id as usize + 1) * dim;
        match &self.table {
            Table::F32(vectors) => {
                for &id in ids {
                    if let Some(row) = vectors.get(rows(id)) {
                        let w = weight(id);
                        sum.iter_mut().zip(row).for_each(|(s, x)| *s += w * x);
                    }
                }
            }
            Table::Int8 { scales, cells } => {
                for &id in ids {
                    if let (Some(&scale), Some(row)) =
                        (scales.get(id as usize), cells.get(rows(id)))
                    {
                        let w = weight(id) * scale;
                        sum.iter_mut()
                            .zip(row)
                            .for_each(|(s, &q)| *s += w * f32::from(q as i8));
                    }
                }
            }
        }
        normalize(sum)
    }

    /// The number of token ids the table covers.
    pub fn vocab_size(&self) -> usize {
        match &self.table {
            Table::F32(vectors) => vectors.len() / self.dim,
            Table::Int8 { scales, .. } => scales.len(),
        }
    }

    /// The vector width.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Writes [`STATIC_FILE`] and its `.sha256` into `dir`, each by a rename so that a reader
    /// never sees half a file. Returns the hex sha256.
    pub fn save(&self, dir: &Path) -> Result<String, Error> {
        self.save_as(dir, STATIC_FILE)
    }

    /// [`StaticModel::save`] under another file name (such as [`TUNED_FILE`]).
    pub fn save_as(&self, dir: &Path, file: &str) -> Result<String, Error> {
        let bytes = self.to_bytes();
        let digest = hex(&Sha256::digest(&bytes));
        write_atomically(&dir.join(file), &bytes)?;
        write_atomically(&checksum_path(dir, file), format!("{digest}\n").as_bytes())?;
        Ok(digest)
    }

    /// Writes the built-in model into the directory `into`: this model quantized to int8
    /// ([`BUILTIN_FILE`]) and the tokenizer of the model directory `from`. Each is written by a
    /// rename, and only when its bytes differ from what `into` holds. Returns the model file's
    /// hex sha256.
    pub fn write_builtin(&self, from: &Path, into: &Path) -> Result<String, Error> {
        let sha = self.quantized().write_file(&into.join(BUILTIN_FILE))?;
        let tokenizer = from.join("tokenizer.json");
        let bytes = fs::read(&tokenizer).map_err(|source| Error::Read {
            path: tokenizer,
            source,
        })?;
        write_atomically(&into.join("tokenizer.json"), &bytes)?;
        Ok(sha)
    }

    /// Writes the model's file (no `.sha256` beside it) to `path`, by a rename. Returns the hex
    /// sha256: `cargo xtask model static` writes the built-in model so.
    pub fn write_file(&self, path: &Path) -> Result<String, Error> {
        let bytes = self.to_bytes();
        write_atomically(path, &bytes)?;
        Ok(hex(&Sha256::digest(&bytes)))
    }

    /// The file's bytes: the header ([`StaticHeader`]), then the rows.
    fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.write_to(&mut |b| bytes.extend_from_slice(b));
        bytes
    }

    /// Hands the file's bytes to `out`, a row at a time: f32 rows, or the int8 table's scales
    /// then its cells.
    fn write_to(&self, out: &mut dyn FnMut(&[u8])) {
        let header = StaticHeader {
            vocab: self.vocab_size(),
            dim: self.dim,
            precision: match self.table {
                Table::F32(_) => Precision::F32,
                Table::Int8 { .. } => Precision::Int8,
            },
        };
        out(&header.encode());
        match &self.table {
            Table::F32(vectors) => {
                let mut row = Vec::with_capacity(self.dim * 4);
                for r in vectors.chunks(self.dim) {
                    row.clear();
                    row.extend(r.iter().flat_map(|v| v.to_le_bytes()));
                    out(&row);
                }
            }
            Table::Int8 { scales, cells } => {
                let scales: Vec<u8> = scales.iter().flat_map(|v| v.to_le_bytes()).collect();
                out(&scales);
                out(cells);
            }
        }
    }

    /// Reads the model [`StaticModel::save`] wrote, refusing it when it does not match its sha256.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        Self::load_file(dir, STATIC_FILE)
    }

    /// [`StaticModel::load`] of another file name in `dir` (such as [`TUNED_FILE`]). The file is
    /// untrusted: its length is checked against [`MAX_STATIC_BYTES`], then its header
    /// ([`StaticHeader::parse`]) against its length, before the rows are allocated; then it is
    /// read once, through a small buffer, into the rows and its sha256.
    pub fn load_file(dir: &Path, file: &str) -> Result<Self, Error> {
        let path = dir.join(file);
        let want = read_checksum_file(dir, file)?;
        let (handle, len) = model_file::open(&path, MAX_STATIC_BYTES)?;
        let read_error = |source| Error::Read {
            path: path.clone(),
            source,
        };
        let mut first = [0u8; STATIC_HEADER];
        std::io::Read::read_exact(&mut &handle, &mut first).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => invalid(&path, Defect::Truncated),
            _ => read_error(e),
        })?;
        let header = StaticHeader::parse(&first, len).map_err(|d| invalid(&path, d))?;
        // The header checked `len` against the rows' size, so this is at most the file's length.
        let data_len = (len - STATIC_HEADER as u64) as usize;
        let mut vectors = Vec::new();
        let mut data = Vec::new();
        match header.precision {
            Precision::F32 => vectors.reserve_exact(header.vocab * header.dim),
            Precision::Int8 => data.reserve_exact(data_len),
        }
        let mut digest = Sha256::new();
        let mut seen = 0u64;
        search_profile::read_in_chunks(&handle, len, |bytes| {
            digest.update(bytes);
            // The rows start past the header; both lengths are multiples of four, so every chunk
            // ends on a float.
            let skip = (STATIC_HEADER as u64)
                .saturating_sub(seen)
                .min(bytes.len() as u64);
            seen += bytes.len() as u64;
            let rows = &bytes[skip as usize..];
            match header.precision {
                Precision::F32 => vectors.extend(
                    rows.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                ),
                Precision::Int8 => data.extend_from_slice(rows),
            }
        })
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => invalid(&path, Defect::Changed),
            _ => read_error(e),
        })?;
        let sha256 = hex(&digest.finalize());
        if sha256 != want {
            return Err(invalid(&path, Defect::ChecksumMismatch));
        }
        let table = match header.precision {
            Precision::F32 => Table::F32(vectors),
            Precision::Int8 => Table::from_data(&header, Cow::Owned(data)),
        };
        if table.cells() != header.vocab * header.dim {
            return Err(invalid(&path, Defect::Changed));
        }
        Ok(Self {
            tokenizer: load_tokenizer(dir, None)?,
            dim: header.dim,
            table,
            sha256,
        })
    }
}

/// The sha256 (hex, lower case) that the `.sha256` file beside `file` in `dir` records.
pub(crate) fn read_checksum_file(dir: &Path, file: &str) -> Result<String, Error> {
    let path = checksum_path(dir, file);
    let bytes = model_file::read(&path, MAX_CHECKSUM_BYTES)?;
    let text = std::str::from_utf8(&bytes).unwrap_or_default().trim();
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid(&path, Defect::NotAChecksum));
    }
    Ok(text.to_ascii_lowercase())
}

/// The contrastive fine-tuning's settings ([`StaticModel::tune`]). The defaults were chosen on the
/// evaluations' dev queries (docs/semantic-design.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuneSettings {
    /// Passes over the pairs.
    pub epochs: usize,
    /// Pairs per step; the other pairs of a batch are each pair's negatives.
    pub batch: usize,
    /// Adam's step size.
    pub learning_rate: f32,
    /// The inverse temperature that multiplies cosines before the softmax.
    pub scale: f32,
    /// The seed of the pairs' order in each epoch.
    pub seed: u64,
}

impl Default for TuneSettings {
    fn default() -> Self {
        Self {
            epochs: 3,
            batch: 256,
            learning_rate: 3e-3,
            scale: 20.0,
            seed: 15,
        }
    }
}

/// Adam's moment decay rates and its denominator's guard, the usual values.
const ADAM_BETA1: f32 = 0.9;
const ADAM_BETA2: f32 = 0.999;
const ADAM_EPSILON: f32 = 1e-8;

impl StaticModel {
    /// Fine-tunes the token table contrastively on `(query, code)` pairs: each text is pooled as
    /// the index pools a chunk (its tokens' rows weighted by their IDF over the pairs' code,
    /// summed and normalised; code cut to its first [`TARGET_BYTES`] like a first chunk), and the
    /// symmetric InfoNCE loss with in-batch negatives (`scale · cosine`, softmax over the batch's
    /// codes for each query and over its queries for each code) is minimised by Adam on the rows
    /// the batch touched (gradients by hand). Single-threaded on purpose: the result is then the
    /// same on every machine and thread count for the same pairs and settings. `progress` gets
    /// each epoch's mean loss.
    pub fn tune(
        &self,
        pairs: &[(String, String)],
        settings: TuneSettings,
        mut progress: impl FnMut(usize, f32),
    ) -> Self {
        let dim = self.dim;
        let vocab = self.vocab_size();
        let queries: Vec<Vec<u32>> = pairs.iter().map(|(q, _)| self.token_ids(q)).collect();
        let codes: Vec<Vec<u32>> = pairs
            .iter()
            .map(|(_, c)| self.token_ids(cut(c, TARGET_BYTES)))
            .collect();
        let mut df = vec![0u32; vocab];
        for ids in &codes {
            let mut seen = ids.clone();
            seen.sort_unstable();
            seen.dedup();
            for id in seen {
                if let Some(d) = df.get_mut(id as usize) {
                    *d += 1;
                }
            }
        }
        let n = codes.len() as f32;
        let idf: Vec<f32> = df
            .iter()
            .map(|&d| (1.0 + (n - d as f32 + 0.5) / (d as f32 + 0.5)).ln())
            .collect();
        let mut table = self.floats().into_owned();
        let (mut m1, mut m2) = (vec![0.0f32; table.len()], vec![0.0f32; table.len()]);
        let mut grad = vec![0.0f32; table.len()];
        let mut touched = vec![false; vocab];
        let mut order: Vec<usize> = (0..pairs.len())
            .filter(|&i| !queries[i].is_empty() && !codes[i].is_empty())
            .collect();
        let mut rng = settings.seed;
        let mut step = 0i32;
        for epoch in 0..settings.epochs {
            shuffle(&mut order, &mut rng);
            let (mut loss_sum, mut batches) = (0.0f64, 0usize);
            for batch in order.chunks(settings.batch.max(2)) {
                if batch.len() < 2 {
                    continue;
                }
                let qs: Vec<&[u32]> = batch.iter().map(|&i| queries[i].as_slice()).collect();
                let cs: Vec<&[u32]> = batch.iter().map(|&i| codes[i].as_slice()).collect();
                let pairs = Batch {
                    dim,
                    idf: &idf,
                    queries: &qs,
                    codes: &cs,
                    scale: settings.scale,
                };
                loss_sum += pairs.gradient(&table, &mut grad, &mut touched);
                batches += 1;
                step += 1;
                let correction1 = 1.0 - ADAM_BETA1.powi(step);
                let correction2 = 1.0 - ADAM_BETA2.powi(step);
                for (id, t) in touched.iter_mut().enumerate() {
                    if !std::mem::take(t) {
                        continue;
                    }
                    let range = id * dim..(id + 1) * dim;
                    for k in range {
                        let gk = std::mem::take(&mut grad[k]);
                        m1[k] = ADAM_BETA1 * m1[k] + (1.0 - ADAM_BETA1) * gk;
                        m2[k] = ADAM_BETA2 * m2[k] + (1.0 - ADAM_BETA2) * gk * gk;
                        table[k] -= settings.learning_rate * (m1[k] / correction1)
                            / ((m2[k] / correction2).sqrt() + ADAM_EPSILON);
                    }
                }
            }
            progress(epoch, (loss_sum / batches.max(1) as f64) as f32);
        }
        Self::new(self.tokenizer.clone(), dim, Table::F32(table))
    }
}

/// A static model's rows.
enum Table {
    /// `vocab × dim` f32s.
    F32(Vec<f32>),
    /// One scale per row and `vocab × dim` int8s (kept as bytes): the built-in model borrows
    /// them from the binary.
    Int8 {
        scales: Vec<f32>,
        cells: Cow<'static, [u8]>,
    },
}

impl Table {
    /// The int8 table in `data`, a file's bytes after a [`Precision::Int8`] header (whose length
    /// the header was checked against; a short `data` gives a table with fewer cells, which the
    /// loader refuses).
    fn from_data(header: &StaticHeader, data: Cow<'static, [u8]>) -> Table {
        let split = (header.vocab * 4).min(data.len());
        let scales = data[..split]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let cells = match data {
            Cow::Borrowed(b) => Cow::Borrowed(&b[split..]),
            Cow::Owned(mut v) => {
                v.drain(..split);
                Cow::Owned(v)
            }
        };
        Table::Int8 { scales, cells }
    }

    /// The cells the table holds.
    fn cells(&self) -> usize {
        match self {
            Table::F32(v) => v.len(),
            Table::Int8 { cells, .. } => cells.len(),
        }
    }
}

/// One batch of the contrastive loss: token ids of each query and of its code, pooled with the
/// `idf` weights from a `dim`-wide table.
struct Batch<'a> {
    dim: usize,
    idf: &'a [f32],
    queries: &'a [&'a [u32]],
    codes: &'a [&'a [u32]],
    scale: f32,
}

impl Batch<'_> {
    /// The batch's mean symmetric InfoNCE loss; its gradient with respect to `table` is added into
    /// `grad` (same layout), and the rows it reaches are marked in `touched`.
    fn gradient(&self, table: &[f32], grad: &mut [f32], touched: &mut [bool]) -> f64 {
        let (dim, b) = (self.dim, self.queries.len());
        let pool = |ids: &[u32]| {
            let mut sum = vec![0.0f32; dim];
            for &id in ids {
                let w = self.idf[id as usize];
                let row = &table[id as usize * dim..][..dim];
                sum.iter_mut().zip(row).for_each(|(s, x)| *s += w * x);
            }
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            sum.iter_mut().for_each(|x| *x /= norm);
            (sum, norm)
        };
        let qs: Vec<_> = self.queries.iter().map(|ids| pool(ids)).collect();
        let ds: Vec<_> = self.codes.iter().map(|ids| pool(ids)).collect();
        let scores: Vec<f32> = (0..b * b)
            .map(|k| self.scale * dot(&qs[k / b].0, &ds[k % b].0))
            .collect();
        // d loss / d score: half from each direction's softmax, averaged over the batch.
        let mut g = vec![0.0f32; b * b];
        let mut loss = 0.0f64;
        for i in 0..b {
            loss += softmax_grad(b, |j| i * b + j, i, &scores, &mut g, b);
            loss += softmax_grad(b, |j| j * b + i, i, &scores, &mut g, b);
        }
        for (k, (ids, (v, norm))) in self
            .queries
            .iter()
            .zip(&qs)
            .chain(self.codes.iter().zip(&ds))
            .enumerate()
        {
            // The gradient on this pooled vector, then back through the normalisation.
            let mut gv = vec![0.0f32; dim];
            for other in 0..b {
                let (coef, u) = if k < b {
                    (g[k * b + other], &ds[other].0)
                } else {
                    (g[other * b + (k - b)], &qs[other].0)
                };
                let coef = coef * self.scale;
                gv.iter_mut().zip(u).for_each(|(x, y)| *x += coef * y);
            }
            let along = dot(&gv, v);
            gv.iter_mut()
                .zip(v)
                .for_each(|(x, y)| *x = (*x - along * y) / norm);
            for &id in ids.iter() {
                let w = self.idf[id as usize];
                touched[id as usize] = true;
                let row = &mut grad[id as usize * dim..][..dim];
                row.iter_mut().zip(&gv).for_each(|(r, x)| *r += w * x);
            }
        }
        loss / (2 * b) as f64
    }
}

/// Adds the gradient of one cross-entropy term (the softmax over `n` scores `scores[at(j)]`,
/// the right answer at `right`) into `g[at(j)]`, divided by `b`, and returns the term's loss.
fn softmax_grad(
    n: usize,
    at: impl Fn(usize) -> usize,
    right: usize,
    scores: &[f32],
    g: &mut [f32],
    b: usize,
) -> f64 {
    let top = (0..n)
        .map(|j| scores[at(j)])
        .fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f64> = (0..n)
        .map(|j| f64::from(scores[at(j)] - top).exp())
        .collect();
    let sum: f64 = exps.iter().sum();
    for (j, e) in exps.iter().enumerate() {
        let p = e / sum;
        let target = if j == right { 1.0 } else { 0.0 };
        g[at(j)] += (0.5 * (p - target) / b as f64) as f32;
    }
    -(exps[right] / sum).ln()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A Fisher-Yates shuffle driven by splitmix64, so that the order depends on the seed alone.
fn shuffle(items: &mut [usize], state: &mut u64) {
    for i in (1..items.len()).rev() {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        items.swap(i, (z % (i as u64 + 1)) as usize);
    }
}

fn checksum_path(dir: &Path, file: &str) -> PathBuf {
    dir.join(format!("{file}.sha256"))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to `path` by a synced temporary file and a rename, unless `path` is a regular
/// file that holds exactly `bytes` already: rewriting the committed built-in model with its own
/// bytes would give it a new mtime, and every crate that embeds it would be compiled again.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    if holds_exactly(path, bytes) {
        return Ok(());
    }
    let tmp = path.with_extension("tmp");
    let fail = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::File::create(&tmp).map_err(fail)?;
    file.write_all(bytes).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    fs::rename(&tmp, path).map_err(fail)
}

/// Whether `path` is a regular file (not reached through a symlink) holding exactly `bytes`. Its
/// size is compared before a byte is read.
fn holds_exactly(path: &Path, bytes: &[u8]) -> bool {
    let same_size =
        fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64);
    same_size && fs::read(path).is_ok_and(|held| held == bytes)
}

/// A principal component projection: the mean and the leading eigenvectors of the covariance.
struct Pca {
    mean: Vec<f64>,
    /// `[components][input]`.
    components: Vec<Vec<f64>>,
}

impl Pca {
    fn fit(rows: &[Vec<f32>], k: usize) -> Self {
        let n = rows.first().map_or(0, Vec::len);
        let count = rows.len().max(1) as f64;
        let mut mean = vec![0.0f64; n];
        for r in rows {
            mean.iter_mut()
                .zip(r)
                .for_each(|(m, &x)| *m += f64::from(x));
        }
        mean.iter_mut().for_each(|m| *m /= count);
        let mut cov = vec![0.0f64; n * n];
        let mut centred = vec![0.0f64; n];
        for r in rows {
            centred
                .iter_mut()
                .zip(r.iter().zip(&mean))
                .for_each(|(c, (&x, m))| *c = f64::from(x) - m);
            for i in 0..n {
                let ci = centred[i];
                for (j, cj) in centred.iter().enumerate().skip(i) {
                    cov[i * n + j] += ci * cj;
                }
            }
        }
        for i in 0..n {
            for j in i..n {
                cov[i * n + j] /= count;
                cov[j * n + i] = cov[i * n + j];
            }
        }
        let (values, vectors) = symmetric_eigen(cov, n);
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
        let components = order
            .into_iter()
            .take(k.min(n))
            .map(|c| {
                let mut v: Vec<f64> = (0..n).map(|i| vectors[i * n + c]).collect();
                // An eigenvector's sign is arbitrary; fixing it makes the build reproducible
                // across eigen-solvers, not only across runs.
                let largest = v
                    .iter()
                    .copied()
                    .fold(0.0f64, |a, x| if x.abs() > a.abs() { x } else { a });
                if largest < 0.0 {
                    v.iter_mut().for_each(|x| *x = -*x);
                }
                v
            })
            .collect();
        Self { mean, components }
    }

    fn project(&self, v: &[f32]) -> Vec<f32> {
        self.components
            .iter()
            .map(|c| {
                c.iter()
                    .zip(v.iter().zip(&self.mean))
                    .map(|(w, (&x, m))| w * (f64::from(x) - m))
                    .sum::<f64>() as f32
            })
            .collect()
    }
}

/// Eigenvalues and eigenvectors (columns of the returned row-major matrix) of a symmetric `n × n`
/// matrix, by cyclic Jacobi rotations: exact to rounding, and deterministic.
fn symmetric_eigen(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0.0f64; n * n];
    (0..n).for_each(|i| v[i * n + i] = 1.0);
    let total: f64 = a.iter().map(|x| x * x).sum();
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j] * a[i * n + j])
            .sum();
        if off <= total * 1e-24 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (kp, kq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * kp - s * kq;
                    a[k * n + q] = s * kp + c * kq;
                }
                for k in 0..n {
                    let (pk, qk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * pk - s * qk;
                    a[q * n + k] = s * pk + c * qk;
                }
                for k in 0..n {
                    let (kp, kq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * kp - s * kq;
                    v[k * n + q] = s * kp + c * kq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_model_is_the_pinned_one_and_saves_as_its_own_bytes() {
        assert_eq!(hex(&Sha256::digest(BUILTIN)), BUILTIN_SHA256);
        let model = StaticModel::builtin().expect("the built-in model loads");
        assert_eq!(model.sha256(), BUILTIN_SHA256);
        assert_eq!(model.dim(), STATIC_DIM);
        assert_eq!(model.vocab_size(), model.tokenizer.get_vocab_size(true));
        assert_eq!(model.to_bytes(), BUILTIN);
        let v = model.embed("read the configuration file");
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }

    #[test]
    fn quantizing_keeps_each_cell_within_half_a_step_and_zero_rows_zero() {
        let tokenizer = StaticModel::builtin().expect("loads").tokenizer;
        let rows = [
            0.5, -0.25, 0.125, 0.0, 0.0, 0.0, 0.0, 0.0, -1e-3, 2e-3, 7e-4, 0.0,
        ];
        let model = StaticModel::new(tokenizer, 4, Table::F32(rows.to_vec()));
        let q = model.quantized();
        let back = q.floats();
        for (row, (want, got)) in rows.chunks(4).zip(rows.chunks(4).zip(back.chunks(4))) {
            let step = row.iter().fold(0.0f32, |m, x| m.max(x.abs())) / 127.0;
            for (w, g) in want.iter().zip(got) {
                assert!((w - g).abs() <= step / 2.0 + f32::EPSILON, "{w} became {g}");
            }
        }
        assert_eq!(&back[4..8], &[0.0; 4]);
    }

    #[test]
    fn an_int8_model_file_loads_back_as_the_same_model() {
        let builtin = StaticModel::builtin().expect("loads");
        let full = StaticModel::new(
            builtin.tokenizer.clone(),
            builtin.dim,
            Table::F32(builtin.floats().into_owned()),
        );
        let q = full.quantized();
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("model/tokenizer.json"),
            dir.path().join("tokenizer.json"),
        )
        .unwrap();
        let sha = q.save_as(dir.path(), "q.bin").expect("saves");
        let loaded = StaticModel::load_file(dir.path(), "q.bin").expect("loads");
        assert_eq!(loaded.sha256(), sha);
        assert_eq!(loaded.to_bytes(), q.to_bytes());
        assert_eq!(loaded.embed("hello world"), q.embed("hello world"));
    }

    #[test]
    fn jacobi_finds_the_eigenpairs_of_a_symmetric_matrix() {
        // [[2,1,0],[1,2,0],[0,0,5]] has eigenvalues 1, 3, 5.
        let (values, vectors) =
            symmetric_eigen(vec![2.0, 1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 5.0], 3);
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        for (got, want) in sorted.iter().zip([1.0, 3.0, 5.0]) {
            assert!((got - want).abs() < 1e-12, "{values:?}");
        }
        let a = [[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 5.0]];
        for c in 0..3 {
            for (i, row) in a.iter().enumerate() {
                let av: f64 = (0..3).map(|j| row[j] * vectors[j * 3 + c]).sum();
                assert!((av - values[c] * vectors[i * 3 + c]).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn pca_keeps_the_direction_of_largest_variance() {
        let rows: Vec<Vec<f32>> = (0..20)
            .map(|i| {
                let t = i as f32 - 10.0;
                vec![t, t, 0.1 * (i % 3) as f32]
            })
            .collect();
        let pca = Pca::fit(&rows, 1);
        let c = &pca.components[0];
        assert!((c[0] - c[1]).abs() < 1e-9 && c[0] > 0.7, "{c:?}");
        assert_eq!(pca.project(&[1.0, 1.0, 0.1]).len(), 1);
    }

    #[test]
    fn infonce_gradient_matches_finite_differences() {
        // Five tokens of width 3; token weights and rows chosen so that no pooled vector is zero.
        let table: Vec<f32> = (0..15).map(|i| ((i * 7 % 11) as f32 - 5.0) / 7.0).collect();
        let idf = [1.0, 0.5, 2.0, 1.5, 0.8];
        let (queries, codes): (&[&[u32]], &[&[u32]]) = (
            &[&[0, 1], &[2], &[3, 4, 4]],
            &[&[1, 2, 3], &[0, 4], &[2, 2, 1]],
        );
        let batch = Batch {
            dim: 3,
            idf: &idf,
            queries,
            codes,
            scale: 5.0,
        };
        let mut grad = vec![0.0f32; table.len()];
        let mut touched = vec![false; 5];
        batch.gradient(&table, &mut grad, &mut touched);
        assert!(touched.iter().all(|&t| t));
        let h = 1e-3f32;
        for k in 0..table.len() {
            let at = |delta: f32| {
                let mut t = table.clone();
                t[k] += delta;
                batch.gradient(&t, &mut [0.0; 15], &mut [false; 5])
            };
            let numeric = ((at(h) - at(-h)) / f64::from(2.0 * h)) as f32;
            assert!(
                (numeric - grad[k]).abs() < 2e-3 + 1e-2 * grad[k].abs(),
                "entry {k}: numeric {numeric}, analytic {}",
                grad[k]
            );
        }
    }

    #[test]
    fn shuffle_depends_on_the_seed_alone() {
        let order = |seed: u64| {
            let mut items: Vec<usize> = (0..10).collect();
            let mut state = seed;
            shuffle(&mut items, &mut state);
            items
        };
        assert_eq!(order(15), order(15));
        assert_ne!(order(15), order(16));
        let mut sorted = order(15);
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    }

    /// The same bytes again leave the file as it was (its inode, so its mtime, is the first
    /// write's); other bytes, or a symlink where the file should be, are written anew.
    #[cfg(unix)]
    #[test]
    fn a_file_already_holding_the_bytes_is_not_rewritten() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.bin");
        let inode = |p: &Path| fs::symlink_metadata(p).unwrap().ino();
        super::write_atomically(&path, b"same bytes").unwrap();
        let first = inode(&path);
        super::write_atomically(&path, b"same bytes").unwrap();
        assert_eq!(inode(&path), first, "identical bytes were written again");
        super::write_atomically(&path, b"other bytes").unwrap();
        assert_ne!(inode(&path), first);
        assert_eq!(fs::read(&path).unwrap(), b"other bytes");
        let target = dir.path().join("target.bin");
        fs::write(&target, b"linked bytes").unwrap();
        let link = dir.path().join("linked.bin");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        super::write_atomically(&link, b"linked bytes").unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().is_file());
    }
}
