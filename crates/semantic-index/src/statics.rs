//! The static model: one vector per vocabulary token, distilled from MiniLM by the model2vec
//! method, so that a chunk is embedded by a table look-up and a mean instead of a transformer.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use crate::Error;
use crate::model::{MiniLm, load_tokenizer, normalize, read};
use crate::text::for_embedding;

/// The width of the static vectors (the PCA's output).
pub const STATIC_DIM: usize = 256;

/// The static model's file name, written next to the MiniLM files; its sha256 is in the same name
/// with `.sha256` appended.
pub const STATIC_FILE: &str = "static-256.bin";

const MAGIC: &[u8; 8] = b"RSSTATIC";
const VERSION: u32 = 1;

/// model2vec's SIF coefficient `a` in the weight `a / (a + p(token))`.
const SIF_COEFFICIENT: f64 = 1e-4;

/// A table of token vectors and the tokenizer that names them.
pub struct StaticModel {
    tokenizer: Tokenizer,
    dim: usize,
    vectors: Vec<f32>,
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
        let (cls, sep) = (special(&tokenizer, "[CLS]")?, special(&tokenizer, "[SEP]")?);
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
        Ok(Self {
            tokenizer,
            dim: STATIC_DIM,
            vectors,
        })
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
        let mut sum = vec![0.0f32; self.dim];
        for &id in ids {
            let w = weight(id);
            if let Some(row) = self
                .vectors
                .get(id as usize * self.dim..(id as usize + 1) * self.dim)
            {
                sum.iter_mut().zip(row).for_each(|(s, x)| *s += w * x);
            }
        }
        normalize(sum)
    }

    /// The number of token ids the table covers.
    pub fn vocab_size(&self) -> usize {
        self.vectors.len() / self.dim
    }

    /// The vector width.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Writes [`STATIC_FILE`] and its `.sha256` into `dir`, each by a rename so that a reader
    /// never sees half a file. Returns the hex sha256.
    pub fn save(&self, dir: &Path) -> Result<String, Error> {
        let mut bytes = Vec::with_capacity(20 + self.vectors.len() * 4);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&((self.vectors.len() / self.dim) as u32).to_le_bytes());
        bytes.extend_from_slice(&(self.dim as u32).to_le_bytes());
        for v in &self.vectors {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let digest = hex(&Sha256::digest(&bytes));
        write_atomically(&dir.join(STATIC_FILE), &bytes)?;
        write_atomically(&checksum_path(dir), format!("{digest}\n").as_bytes())?;
        Ok(digest)
    }

    /// Reads the model [`StaticModel::save`] wrote, refusing it when it does not match its sha256.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let path = dir.join(STATIC_FILE);
        let bytes = read(&path)?;
        let want = String::from_utf8_lossy(&read(&checksum_path(dir))?)
            .trim()
            .to_owned();
        if hex(&Sha256::digest(&bytes)) != want {
            return Err(Error::Checksum(path));
        }
        let word = |i: usize| {
            bytes
                .get(i..i + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let (Some(version), Some(vocab), Some(dim)) = (word(8), word(12), word(16)) else {
            return Err(Error::StaticFormat("shorter than its header".into()));
        };
        if &bytes[..8] != MAGIC || version != VERSION as usize || dim == 0 {
            return Err(Error::StaticFormat(
                "not a static model of this version".into(),
            ));
        }
        let data = &bytes[20..];
        if data.len() != vocab * dim * 4 {
            return Err(Error::StaticFormat("size does not match the header".into()));
        }
        let vectors = data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Self {
            tokenizer: load_tokenizer(dir, None)?,
            dim,
            vectors,
        })
    }
}

fn special(tokenizer: &Tokenizer, token: &str) -> Result<u32, Error> {
    tokenizer
        .token_to_id(token)
        .ok_or_else(|| Error::Tokenizer(format!("no {token} token")))
}

fn checksum_path(dir: &Path) -> PathBuf {
    dir.join(format!("{STATIC_FILE}.sha256"))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
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
}
