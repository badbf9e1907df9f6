//! MiniLM: a BERT encoder read from a sentence-transformers directory, with mean pooling and L2
//! normalisation as sentence-transformers does.
//!
//! The forward pass is written here on ndarray's `dot` rather than taken from candle: it is about
//! a hundred lines, compiles in seconds, and needs no `unsafe` of ours (docs/semantic-design.md has the
//! measured cost of both).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use ndarray::{Array1, Array2, ArrayView2, Axis, s};
use tokenizers::{Tokenizer, TruncationParams};

use crate::Error;
use crate::model_file::{
    self, BertConfig, Defect, MAX_CONFIG_BYTES, MAX_TOKENIZER_BYTES, MAX_WEIGHTS_BYTES,
    Safetensors, TensorInfo, invalid,
};

/// The number of positions the model was trained with; longer inputs are truncated to it.
pub const MAX_POSITIONS: usize = 512;

/// Sequences of equal length are run together in batches of at most this many, which keeps the
/// matrices large enough for the sgemm to be efficient and small enough to stay in cache.
const BATCH: usize = 64;

/// A loaded MiniLM (any BERT sentence-transformer with `model.safetensors` and `tokenizer.json`).
pub struct MiniLm {
    tokenizer: Tokenizer,
    word: Array2<f32>,
    position: Array2<f32>,
    token_type: Array1<f32>,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    threads: usize,
    fingerprint: [u8; 32],
}

struct Linear {
    /// `[out, in]`, as PyTorch stores it.
    weight: Array2<f32>,
    bias: Array1<f32>,
}

impl Linear {
    fn forward(&self, x: &ArrayView2<f32>) -> Array2<f32> {
        let mut y = x.dot(&self.weight.t());
        y += &self.bias;
        y
    }
}

struct LayerNorm {
    gamma: Array1<f32>,
    beta: Array1<f32>,
    eps: f32,
}

impl LayerNorm {
    fn apply(&self, x: &mut Array2<f32>) {
        for mut row in x.rows_mut() {
            let n = row.len() as f32;
            let mean = row.sum() / n;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    up: Linear,
    down: Linear,
    out_norm: LayerNorm,
}

impl MiniLm {
    /// The width of the vectors the model in `dir` makes (`hidden_size` in its `config.json`),
    /// read without loading the model: `None` when there is no such file or it is not a valid
    /// config ([`BertConfig::parse`]).
    pub fn dim_in(dir: &Path) -> Option<usize> {
        let bytes = model_file::read(&dir.join("config.json"), MAX_CONFIG_BYTES).ok()?;
        BertConfig::parse(&bytes).ok().map(|c| c.hidden)
    }

    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` from `dir`. The tokenizer's
    /// own padding and truncation (128 in the packaged all-MiniLM-L6-v2) are turned off; inputs
    /// are truncated at the `max_seq_length` of `sentence_bert_config.json` when the directory
    /// has one (256 for all-MiniLM-L6-v2, the length it was trained for and what
    /// sentence-transformers reads), else at the model's [`MAX_POSITIONS`].
    ///
    /// The files are untrusted: each is refused above its kind's size limit before it is read,
    /// `config.json` must state sizes this code supports ([`BertConfig::parse`]), and the
    /// weights' header must describe exactly the tensors that configuration needs, in float32,
    /// inside the file ([`Safetensors::parse`]), before a tensor is allocated.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let config_path = dir.join("config.json");
        let config_bytes = model_file::read(&config_path, MAX_CONFIG_BYTES)?;
        let config = BertConfig::parse(&config_bytes).map_err(|d| invalid(&config_path, d))?;
        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer_bytes = model_file::read(&tokenizer_path, MAX_TOKENIZER_BYTES)?;
        // Positions past the model's own are never read.
        let max_len = max_seq_length(dir)?.min(config.positions);
        let mut tensors = Tensors::read(&dir.join("model.safetensors"), &config)?;
        // What a vector depends on, cheaply: the weights by length and CRC-32 (sha256 of 90 MB
        // would add about 0.3 s to every load), the configuration and the tokenizer whole.
        let fingerprint: [u8; 32] = {
            use sha2::{Digest, Sha256};
            let mut h = Sha256::new();
            h.update(tensors.crc.to_le_bytes());
            h.update(tensors.len.to_le_bytes());
            h.update((max_len as u64).to_le_bytes());
            h.update(&config_bytes);
            h.update(&tokenizer_bytes);
            h.finalize().into()
        };
        let eps = config.layer_norm_eps;
        let norm = |t: &mut Tensors, prefix: &str| -> Result<LayerNorm, Error> {
            Ok(LayerNorm {
                gamma: t.vector(&format!("{prefix}.weight"))?,
                beta: t.vector(&format!("{prefix}.bias"))?,
                eps,
            })
        };
        let linear = |t: &mut Tensors, prefix: &str| -> Result<Linear, Error> {
            Ok(Linear {
                weight: t.matrix(&format!("{prefix}.weight"))?,
                bias: t.vector(&format!("{prefix}.bias"))?,
            })
        };
        let mut built = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let p = format!("encoder.layer.{i}");
            let t = &mut tensors;
            built.push(Layer {
                query: linear(t, &format!("{p}.attention.self.query"))?,
                key: linear(t, &format!("{p}.attention.self.key"))?,
                value: linear(t, &format!("{p}.attention.self.value"))?,
                attn_out: linear(t, &format!("{p}.attention.output.dense"))?,
                attn_norm: norm(t, &format!("{p}.attention.output.LayerNorm"))?,
                up: linear(t, &format!("{p}.intermediate.dense"))?,
                down: linear(t, &format!("{p}.output.dense"))?,
                out_norm: norm(t, &format!("{p}.output.LayerNorm"))?,
            });
        }
        let token_types = tensors.matrix("embeddings.token_type_embeddings.weight")?;
        Ok(Self {
            tokenizer: tokenizer_from_bytes(&tokenizer_path, tokenizer_bytes, Some(max_len))?,
            word: tensors.matrix("embeddings.word_embeddings.weight")?,
            position: tensors.matrix("embeddings.position_embeddings.weight")?,
            token_type: token_types.row(0).to_owned(),
            embed_norm: norm(&mut tensors, "embeddings.LayerNorm")?,
            layers: built,
            heads: config.heads,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            fingerprint,
        })
    }

    /// The width of the embeddings.
    pub fn dim(&self) -> usize {
        self.word.ncols()
    }

    /// What this model's vectors depend on: its weights (by length and CRC-32), `config.json`,
    /// `tokenizer.json` and the input length. Vectors kept under another fingerprint are another
    /// model's.
    pub fn fingerprint(&self) -> [u8; 32] {
        self.fingerprint
    }

    /// The vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.word.nrows()
    }

    /// The tokenizer, configured as [`MiniLm::load`] describes.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Uses at most `threads` threads (at least one) for [`MiniLm::embed_ids`].
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads.max(1);
    }

    /// Embeds texts as sentence-transformers does: `[CLS] text [SEP]`, mean pooling over every
    /// token, L2 normalisation. One vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        self.embed_limited(texts, usize::MAX)
    }

    /// [`MiniLm::embed`] with each text cut to its first `max_tokens` word pieces, `[CLS]` and
    /// `[SEP]` included (at least those two), when that is shorter than the directory's own
    /// limit: the vectors sentence-transformers gives with a `max_seq_length` of `max_tokens`.
    /// The re-rank reads chunks this way: their head says what they are about, and MiniLM's
    /// cost grows with the length (docs/semantic-design.md).
    pub fn embed_limited(&self, texts: &[&str], max_tokens: usize) -> Result<Vec<Vec<f32>>, Error> {
        let ids = texts
            .iter()
            .map(|t| self.tokenize(t, max_tokens))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(self.embed_ids(&ids))
    }

    /// The word pieces [`MiniLm::embed_limited`] runs for `text`: `[CLS]`, the text's first
    /// pieces, `[SEP]`, at most `max_tokens` (and at least those two) in all. Texts tokenized
    /// with different limits can be embedded together by [`MiniLm::embed_ids`].
    pub fn tokenize(&self, text: &str, max_tokens: usize) -> Result<Vec<u32>, Error> {
        let keep = max_tokens.max(2);
        let mut ids = self
            .tokenizer
            .encode(text, true)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        if ids.len() > keep {
            // The closing `[SEP]` stays, as in the tokenizer's own truncation.
            let last = ids[ids.len() - 1];
            ids.truncate(keep - 1);
            ids.push(last);
        }
        Ok(ids)
    }

    /// Embeds already tokenized sequences (special tokens included), pooled and normalised. Equal
    /// lengths are batched together; the batches are spread over the threads.
    pub fn embed_ids(&self, ids: &[Vec<u32>]) -> Vec<Vec<f32>> {
        self.embed_ids_on(ids, self.threads)
    }

    /// [`MiniLm::embed_ids`] on at most `threads` threads (at least one): a background pass
    /// leaves the other cores to the queries.
    pub fn embed_ids_on(&self, ids: &[Vec<u32>], threads: usize) -> Vec<Vec<f32>> {
        let threads = threads.clamp(1, self.threads);
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| (ids[i].len(), i));
        // No batch holds more than a thread's share of the word pieces: a re-rank's head, cut to
        // one length, would otherwise be one batch on one thread while the others wait.
        let total: usize = ids.iter().map(Vec::len).sum();
        let share = total.div_ceil(threads).max(1);
        let mut batches: Vec<Vec<usize>> = Vec::new();
        for i in order {
            let len = ids[i].len();
            match batches.last_mut() {
                Some(b)
                    if b.len() < BATCH
                        && ids[b[0]].len() == len
                        && (b.len() + 1) * len <= share.max(len) =>
                {
                    b.push(i)
                }
                _ => batches.push(vec![i]),
            }
        }
        let out = Mutex::new(vec![Vec::new(); ids.len()]);
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..threads.min(batches.len()) {
                scope.spawn(|| {
                    loop {
                        let b = next.fetch_add(1, Ordering::Relaxed);
                        let Some(batch) = batches.get(b) else { break };
                        let seqs: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
                        let pooled = self.forward(&seqs);
                        let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
                        for (row, &i) in pooled.rows().into_iter().zip(batch) {
                            out[i] = normalize(row.to_vec());
                        }
                    }
                });
            }
        });
        out.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs sequences of one length through the encoder and mean-pools each: `[batch, hidden]`.
    fn forward(&self, seqs: &[&[u32]]) -> Array2<f32> {
        let len = seqs.first().map_or(0, |s| s.len());
        let hidden = self.dim();
        if len == 0 {
            return Array2::zeros((seqs.len(), hidden));
        }
        let mut x = Array2::<f32>::zeros((seqs.len() * len, hidden));
        for (b, seq) in seqs.iter().enumerate() {
            for (p, &id) in seq.iter().enumerate() {
                let mut row = x.row_mut(b * len + p);
                // An id outside the vocabulary cannot come from the model's own tokenizer.
                let id = (id as usize).min(self.vocab_size() - 1);
                row.assign(&self.word.row(id));
                row += &self.position.row(p.min(self.position.nrows() - 1));
                row += &self.token_type;
            }
        }
        self.embed_norm.apply(&mut x);
        let head = hidden / self.heads;
        let scale = 1.0 / (head as f32).sqrt();
        for layer in &self.layers {
            let q = layer.query.forward(&x.view());
            let k = layer.key.forward(&x.view());
            let v = layer.value.forward(&x.view());
            let mut ctx = Array2::<f32>::zeros((seqs.len() * len, hidden));
            for b in 0..seqs.len() {
                let rows = b * len..(b + 1) * len;
                for h in 0..self.heads {
                    let cols = h * head..(h + 1) * head;
                    let qh = q.slice(s![rows.clone(), cols.clone()]);
                    let kh = k.slice(s![rows.clone(), cols.clone()]);
                    let vh = v.slice(s![rows.clone(), cols.clone()]);
                    let mut scores = qh.dot(&kh.t());
                    for mut row in scores.rows_mut() {
                        let max = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v * scale));
                        let mut sum = 0.0;
                        row.mapv_inplace(|v| {
                            let e = (v * scale - max).exp();
                            sum += e;
                            e
                        });
                        row /= sum;
                    }
                    ctx.slice_mut(s![rows.clone(), cols])
                        .assign(&scores.dot(&vh));
                }
            }
            let mut a = layer.attn_out.forward(&ctx.view());
            a += &x;
            layer.attn_norm.apply(&mut a);
            let mut inter = layer.up.forward(&a.view());
            inter.mapv_inplace(gelu);
            let mut out = layer.down.forward(&inter.view());
            out += &a;
            layer.out_norm.apply(&mut out);
            x = out;
        }
        let pooled: Vec<Array1<f32>> = (0..seqs.len())
            .map(|b| {
                x.slice(s![b * len..(b + 1) * len, ..])
                    .mean_axis(Axis(0))
                    .unwrap_or_else(|| Array1::zeros(hidden))
            })
            .collect();
        let mut result = Array2::zeros((seqs.len(), hidden));
        for (b, p) in pooled.iter().enumerate() {
            result.row_mut(b).assign(p);
        }
        result
    }
}

/// The input length sentence-transformers uses for the model in `dir`: `max_seq_length` of
/// `sentence_bert_config.json`, at most [`MAX_POSITIONS`]; [`MAX_POSITIONS`] without that file.
fn max_seq_length(dir: &Path) -> Result<usize, Error> {
    let path = dir.join("sentence_bert_config.json");
    let bytes = match model_file::read(&path, MAX_CONFIG_BYTES) {
        Ok(bytes) => bytes,
        Err(Error::Missing { .. }) => return Ok(MAX_POSITIONS),
        Err(e) => return Err(e),
    };
    let config: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes).map_err(|_| invalid(&path, Defect::NotJson))?;
    match config.get("max_seq_length") {
        None => Ok(MAX_POSITIONS),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 2 => {
                Ok(usize::try_from(n).map_or(MAX_POSITIONS, |n| n.min(MAX_POSITIONS)))
            }
            _ => Err(invalid(&path, Defect::OutOfRange("max_seq_length"))),
        },
    }
}

/// Loads `tokenizer.json` with its padding off and truncation at `max_len` (none when `None`).
pub(crate) fn load_tokenizer(dir: &Path, max_len: Option<usize>) -> Result<Tokenizer, Error> {
    let path = dir.join("tokenizer.json");
    let bytes = model_file::read(&path, MAX_TOKENIZER_BYTES)?;
    tokenizer_from_bytes(&path, bytes, max_len)
}

/// [`load_tokenizer`] from the bytes of the `tokenizer.json` at `path`.
pub(crate) fn tokenizer_from_bytes(
    path: &Path,
    bytes: Vec<u8>,
    max_len: Option<usize>,
) -> Result<Tokenizer, Error> {
    let mut tokenizer =
        Tokenizer::from_bytes(bytes).map_err(|_| invalid(path, Defect::NotATokenizer))?;
    tokenizer.with_padding(None);
    let truncation = max_len.map(|max_length| TruncationParams {
        max_length,
        ..TruncationParams::default()
    });
    tokenizer
        .with_truncation(truncation)
        .map_err(|_| invalid(path, Defect::NotATokenizer))?;
    Ok(tokenizer)
}

/// The exact (erf) GELU that BERT's `"gelu"` names.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// erf with a fractional error below 1.2e-7 (Numerical Recipes' `erfcc`), far under f32's
/// rounding of the activations it feeds.
fn erf(x: f32) -> f32 {
    let z = f64::from(x).abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    let r = (1.0 - erfc) as f32;
    if x >= 0.0 { r } else { -r }
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// The F32 tensors of a safetensors file that a [`BertConfig`] needs, taken out one by one.
struct Tensors {
    path: PathBuf,
    /// The file's CRC-32 and length.
    crc: u32,
    len: u64,
    by_name: HashMap<String, (Vec<usize>, Vec<f32>)>,
}

impl Tensors {
    /// Reads the format: an 8-byte little-endian header length, a JSON header naming each
    /// tensor's dtype, shape and byte range, then the data. The header is checked whole
    /// ([`Safetensors::parse`]) and every tensor `config` needs must be there in F32 with the
    /// shape it gives, before one is allocated; then only those are read, through a small buffer.
    /// Tensors of other dtypes (the I64 `position_ids`) are skipped.
    fn read(path: &Path, config: &BertConfig) -> Result<Self, Error> {
        let (file, len) = model_file::open(path, MAX_WEIGHTS_BYTES)?;
        let io = |source: std::io::Error| match source.kind() {
            // The length was checked: a file that ends early changed meanwhile.
            std::io::ErrorKind::UnexpectedEof => invalid(path, Defect::Changed),
            _ => Error::Read {
                path: path.to_path_buf(),
                source,
            },
        };
        let mut first = [0u8; 8];
        std::io::Read::read_exact(&mut &file, &mut first).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => invalid(path, Defect::Truncated),
            _ => io(e),
        })?;
        let n = Safetensors::header_len(&first, len).map_err(|d| invalid(path, d))?;
        // At most MAX_SAFETENSORS_HEADER, and inside the file.
        let mut head = vec![0u8; 8 + n as usize];
        head[..8].copy_from_slice(&first);
        std::io::Read::read_exact(&mut &file, &mut head[8..]).map_err(io)?;
        let header = Safetensors::parse(&head, len).map_err(|d| invalid(path, d))?;
        drop(head);
        let present: HashMap<&str, &TensorInfo> = header
            .tensors
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let wanted = config.tensors();
        let mut found = Vec::with_capacity(wanted.len());
        for (name, shape) in wanted {
            let t = present
                .get(name.as_str())
                .filter(|t| t.dtype == "F32")
                .ok_or_else(|| invalid(path, Defect::MissingTensor))?;
            if t.shape != shape {
                return Err(invalid(path, Defect::TensorShape));
            }
            found.push((name, shape, t.offset, (t.len / 4) as usize));
        }
        let mut crc = crc32fast::Hasher::new();
        search_profile::read_in_chunks(&file, len, |bytes| crc.update(bytes)).map_err(io)?;
        let mut by_name = HashMap::with_capacity(found.len());
        for (name, shape, offset, count) in found {
            let values = model_file::read_f32s(&file, offset, count).map_err(io)?;
            by_name.insert(name, (shape, values));
        }
        Ok(Self {
            path: path.to_path_buf(),
            crc: crc.finalize(),
            len,
            by_name,
        })
    }

    fn take(&mut self, name: &str, rank: usize) -> Result<(Vec<usize>, Vec<f32>), Error> {
        self.by_name
            .remove(name)
            .filter(|(shape, _)| shape.len() == rank)
            .ok_or_else(|| invalid(&self.path, Defect::MissingTensor))
    }

    fn matrix(&mut self, name: &str) -> Result<Array2<f32>, Error> {
        let (shape, values) = self.take(name, 2)?;
        Array2::from_shape_vec((shape[0], shape[1]), values)
            .map_err(|_| invalid(&self.path, Defect::TensorShape))
    }

    fn vector(&mut self, name: &str) -> Result<Array1<f32>, Error> {
        Ok(Array1::from_vec(self.take(name, 1)?.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-2.0, -0.995_322_3),
        ] {
            assert!((erf(x) - want).abs() < 1e-6, "erf({x}) = {}", erf(x));
        }
    }
}
