//! The hybrid ranking: BM25, the static model's cosine, definition and file-name boosts, one
//! result per document, and a MiniLM re-rank of the first candidates.
//!
//! Every weight is in [`Weights`]; their values were chosen on the evaluation's *dev* queries,
//! never on the queries it reports (docs/semantic-design.md).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::bm25::Bm25;
use crate::chunk::{Chunk, chunk_file, searched_text};
use crate::model::MiniLm;
use crate::statics::StaticModel;
use crate::text::{for_embedding, name_terms, sub_tokens};

/// What to index: a document is a file in a repository (`key` = its path); the evaluation also
/// indexes functions, each its own document inside a shared file.
#[derive(Clone, Debug)]
pub struct Document {
    /// What results are deduplicated by: one hit per key.
    pub key: String,
    /// The file path the file-name boost reads.
    pub path: String,
    /// The content.
    pub text: String,
}

/// A ranked document.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The document's index in the list given to [`SemanticIndex::build`].
    pub doc: usize,
    /// The best chunk's index in [`SemanticIndex::chunks`].
    pub chunk: usize,
    /// The score, in `[0, 1]`.
    pub score: f32,
}

/// Which ranking [`SemanticIndex::search`] uses (the evaluation reports each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scorer {
    /// BM25 alone.
    Bm25,
    /// The static model's cosine alone.
    Dense,
    /// BM25, cosine and boosts.
    Hybrid,
    /// The hybrid ranking with its first [`Weights::rerank_depth`] results re-ranked by MiniLM.
    Rerank,
}

/// The ranking's weights. The hybrid score is
/// `(bm25 · bm25/max bm25 + dense · max(cos, 0) + definition · d + file_name · f) / sum of weights`
/// where `d` is the fraction of the query's terms that name a definition in the chunk and `f` the
/// fraction of its subject terms that are words of the file's name, both sides in their name
/// stems (`text::name_terms`); the re-ranked score is `rerank · minilm_cos + (1 − rerank) · hybrid/top`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weights {
    /// The weight of the max-normalised BM25 score.
    pub bm25: f32,
    /// The weight of the static cosine.
    pub dense: f32,
    /// The weight of the definition boost.
    pub definition: f32,
    /// The weight of the file-name boost.
    pub file_name: f32,
    /// The weight of MiniLM's cosine in the re-ranked score.
    pub rerank: f32,
    /// How many of the hybrid ranking's first documents MiniLM re-ranks.
    pub rerank_depth: usize,
    /// How many word pieces of a chunk's [`rerank_text`] MiniLM reads, `[CLS]` and `[SEP]`
    /// included ([`MiniLm::embed_limited`]): the path and the chunk's first lines.
    pub rerank_tokens: usize,
    /// Whether the re-rank min-max normalises MiniLM's cosines and the hybrid scores over the
    /// re-ranked head before mixing them (otherwise: raw cosine, hybrid divided by the best).
    pub rerank_minmax: bool,
    /// Whether the hybrid score divides each cosine by the query's best cosine, as it does BM25.
    pub relative_dense: bool,
    /// Whether static vectors weight each token by its inverse document frequency over the
    /// index's chunks (on top of the model's SIF weights). Read once, by
    /// [`SemanticIndex::build_with`].
    pub idf_dense: bool,
    /// The weight of a file's second-best chunk in the store's file score (`rank::file_score`): a
    /// file that matches a question in two places ranks above one that matches it once. The
    /// in-memory index ranks documents of one chunk each and does not read it.
    pub second_chunk: f32,
    /// The share of a file's only chunk that counts as its second-best chunk in the store's file
    /// score. At 0 a file of one chunk scores at most half its chunk (with `second_chunk` 1), and
    /// a short file that is exactly about a question ranks below longer files that are partly
    /// about it.
    pub lone_chunk: f32,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            bm25: 0.35,
            dense: 0.65,
            definition: 0.2,
            // Chosen on semble's questions with the path prior at 0.8: the mean NDCG@10 was
            // 0.827 at 0.3, against 0.809 at 0.05, 0.821 at 0.15 and 0.822 at 0.5.
            file_name: 0.3,
            rerank: 0.7,
            rerank_depth: 30,
            rerank_tokens: 64,
            rerank_minmax: false,
            relative_dense: true,
            idf_dense: true,
            // Chosen on semble's questions (`cargo xtask eval semble`): the mean NDCG@10 went
            // from 0.717 (the best chunk alone) to 0.741, 0.749 and 0.752 at 0.3, 0.6 and 1.0.
            second_chunk: 1.0,
            // Chosen on semble's questions: the mean NDCG@10 was 0.865 at 0, 0.867 at 0.25 and
            // 0.35, 0.868 at 0.5 and 0.861 at 1 (docs/semantic-design.md, "Prose documents, and a
            // file of one chunk").
            lone_chunk: 0.5,
        }
    }
}

/// MiniLM vectors of chunks, by [`Chunk::hash`].
type ChunkVectors = HashMap<[u8; 32], Vec<f32>>;

/// An in-memory semantic index over documents.
pub struct SemanticIndex<'m> {
    statics: &'m StaticModel,
    docs: Vec<Document>,
    chunks: Vec<Chunk>,
    chunk_doc: Vec<u32>,
    bm25: Bm25,
    /// Row-major `[chunk][dim]` int8 static vectors, each row scaled by its own `scales` entry.
    dense: Vec<i8>,
    scales: Vec<f32>,
    /// Per token id: its inverse document frequency over the chunks.
    idf: Vec<f32>,
    /// [`Weights::idf_dense`] as the index was built: queries must be embedded the same way as
    /// the chunks, whatever `weights` says later.
    idf_dense: bool,
    /// Per chunk: the sub-tokens of the names its definition lines introduce.
    definitions: Vec<Vec<String>>,
    /// Per document: the sub-tokens of its file name.
    file_words: Vec<Vec<String>>,
    /// MiniLM vectors of chunks, by content hash.
    /// The [`Weights::rerank_tokens`] they were computed with, which a later change of the
    /// weights empties them for.
    cache: Mutex<(usize, ChunkVectors)>,
    /// The ranking's weights.
    pub weights: Weights,
}

impl<'m> SemanticIndex<'m> {
    /// Chunks and indexes `docs`.
    pub fn build(statics: &'m StaticModel, docs: Vec<Document>) -> Self {
        Self::build_with(statics, docs, Weights::default())
    }

    /// [`SemanticIndex::build`] with other weights (the index's vectors depend on
    /// [`Weights::idf_dense`]).
    pub fn build_with(statics: &'m StaticModel, docs: Vec<Document>, weights: Weights) -> Self {
        let mut index = Self {
            statics,
            chunks: Vec::new(),
            chunk_doc: Vec::new(),
            bm25: Bm25::default(),
            dense: Vec::new(),
            scales: Vec::new(),
            definitions: Vec::new(),
            idf: Vec::new(),
            idf_dense: weights.idf_dense,
            file_words: Vec::new(),
            cache: Mutex::new((weights.rerank_tokens, HashMap::new())),
            weights,
            docs: Vec::new(),
        };
        for (d, doc) in docs.iter().enumerate() {
            index.file_words.push(crate::segment::file_words(&doc.path));
            for chunk in chunk_file(&doc.path, &doc.text) {
                index.bm25.add(&searched_text(&chunk.path, &chunk.text));
                // The names the chunker found: the syntax tree's where a grammar parsed the
                // file, the definition lines' otherwise.
                index
                    .definitions
                    .push(chunk.defines.iter().flat_map(|d| sub_tokens(d)).collect());
                index.chunks.push(chunk);
                index.chunk_doc.push(d as u32);
            }
        }
        let ids: Vec<Vec<u32>> = index
            .chunks
            .iter()
            .map(|c| statics.token_ids(&searched_text(&c.path, &c.text)))
            .collect();
        let mut df = vec![0u32; statics.vocab_size()];
        for chunk in &ids {
            let mut seen: Vec<u32> = chunk.clone();
            seen.sort_unstable();
            seen.dedup();
            for id in seen {
                if let Some(d) = df.get_mut(id as usize) {
                    *d += 1;
                }
            }
        }
        let n = ids.len() as f32;
        index.idf = df
            .iter()
            .map(|&d| (1.0 + (n - d as f32 + 0.5) / (d as f32 + 0.5)).ln())
            .collect();
        for chunk in &ids {
            let (q, scale) = quantize(&index.static_vector(chunk));
            index.dense.extend(q);
            index.scales.push(scale);
        }
        index.docs = docs;
        index
    }

    /// The chunks, in the order hits name them.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// The documents, in the order hits name them.
    pub fn documents(&self) -> &[Document] {
        &self.docs
    }

    /// A static vector, its tokens weighted by their inverse document frequency in this index
    /// when [`Weights::idf_dense`] says so.
    fn static_vector(&self, ids: &[u32]) -> Vec<f32> {
        if self.idf_dense {
            // A token no chunk holds has the highest IDF there is.
            let top = (1.0 + (self.chunks.len() as f32 + 0.5) / 0.5).ln();
            self.statics
                .embed_ids(ids, |id| self.idf.get(id as usize).copied().unwrap_or(top))
        } else {
            self.statics.embed_ids(ids, |_| 1.0)
        }
    }

    /// How many chunk vectors MiniLM has computed and cached so far.
    pub fn cached_vectors(&self) -> usize {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).1.len()
    }

    /// The MiniLM chunk vectors cached so far, by [`Chunk::hash`], in hash order (the
    /// evaluation keeps them between runs of one model).
    pub fn minilm_cache(&self) -> Vec<([u8; 32], Vec<f32>)> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let mut entries: Vec<_> = cache.1.iter().map(|(h, v)| (*h, v.clone())).collect();
        entries.sort_unstable_by_key(|a| a.0);
        entries
    }

    /// Adds MiniLM chunk vectors by [`Chunk::hash`], as [`SemanticIndex::minilm_cache`]
    /// returned them from an index re-ranking with the same MiniLM and the same
    /// [`Weights::rerank_tokens`].
    pub fn extend_minilm_cache(&self, entries: impl IntoIterator<Item = ([u8; 32], Vec<f32>)>) {
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .extend(entries);
    }

    /// The `k` best documents for `query`. [`Scorer::Rerank`] needs `minilm`; without it the
    /// hybrid ranking is returned.
    pub fn search(
        &self,
        query: &str,
        scorer: Scorer,
        minilm: Option<&MiniLm>,
        k: usize,
    ) -> Vec<Hit> {
        let w = self.weights;
        let bm25 = self.bm25.scores(query);
        let top = bm25.iter().copied().fold(0.0f32, f32::max);
        let (qv, qscale) = quantize(&self.static_vector(&self.statics.token_ids(query)));
        let dim = self.statics.dim();
        let mut terms = sub_tokens(query);
        terms.sort();
        terms.dedup();
        let name_terms = name_terms(&terms);
        let cosines: Vec<f32> = (0..self.chunks.len())
            .map(|c| {
                let row = &self.dense[c * dim..(c + 1) * dim];
                let dot: i32 = row
                    .iter()
                    .zip(&qv)
                    .map(|(&a, &b)| i32::from(a) * i32::from(b))
                    .sum();
                (dot as f32 * qscale * self.scales[c]).clamp(0.0, 1.0)
            })
            .collect();
        let cos_top = cosines.iter().copied().fold(0.0f32, f32::max);
        let mut best: HashMap<u32, (f32, usize)> = HashMap::new();
        for (c, &doc) in self.chunk_doc.iter().enumerate() {
            let lexical = if top > 0.0 { bm25[c] / top } else { 0.0 };
            let cosine = || {
                let c = cosines[c];
                if w.relative_dense && cos_top > 0.0 {
                    c / cos_top
                } else {
                    c
                }
            };
            let score = match scorer {
                Scorer::Bm25 => lexical,
                Scorer::Dense => cosine(),
                Scorer::Hybrid | Scorer::Rerank => combine(
                    &w,
                    lexical,
                    cosine(),
                    share(&terms, &self.definitions[c]),
                    share(&name_terms, &self.file_words[doc as usize]),
                ),
            };
            let entry = best.entry(doc).or_insert((f32::NEG_INFINITY, c));
            if score > entry.0 {
                *entry = (score, c);
            }
        }
        let mut hits: Vec<Hit> = best
            .into_iter()
            .map(|(doc, (score, chunk))| Hit {
                doc: doc as usize,
                chunk,
                score,
            })
            .collect();
        let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc));
        hits.sort_by(order);
        if let (Scorer::Rerank, Some(minilm)) = (scorer, minilm) {
            self.rerank(query, minilm, &mut hits);
            let depth = w.rerank_depth.min(hits.len());
            hits[..depth].sort_by(order);
        }
        hits.truncate(k);
        hits
    }

    /// Re-scores the first [`Weights::rerank_depth`] hits with MiniLM's cosine; the others are
    /// scaled under the lowest re-ranked score, so that the scores stay one ranking in `[0, 1]`.
    fn rerank(&self, query: &str, minilm: &MiniLm, hits: &mut [Hit]) {
        let w = self.weights;
        let depth = w.rerank_depth.min(hits.len());
        let Some(query) = minilm
            .embed(&[&for_embedding(query)])
            .ok()
            .and_then(|mut v| v.pop())
        else {
            return;
        };
        if depth == 0 {
            return;
        }
        let vectors = self.minilm_vectors(minilm, &hits[..depth]);
        let cosines: Vec<f32> = vectors.iter().map(|v| unit_cosine(v, &query)).collect();
        let hybrid: Vec<f32> = hits.iter().map(|h| h.score).collect();
        for (hit, score) in hits.iter_mut().zip(rerank_scores(&w, &cosines, &hybrid)) {
            hit.score = score;
        }
    }

    /// What MiniLM reads of chunk `c` when it re-ranks, and the hash its vector is cached
    /// under.
    pub fn rerank_input(&self, c: usize) -> ([u8; 32], String) {
        let chunk = &self.chunks[c];
        (chunk.hash, rerank_text(&chunk.path, &chunk.text))
    }

    /// MiniLM vectors of the hits' best chunks, from the cache or embedded now (and cached).
    fn minilm_vectors(&self, minilm: &MiniLm, hits: &[Hit]) -> Vec<Vec<f32>> {
        let mut held = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if held.0 != self.weights.rerank_tokens {
            *held = (self.weights.rerank_tokens, HashMap::new());
        }
        let cache = &mut held.1;
        let inputs: Vec<([u8; 32], String)> =
            hits.iter().map(|h| self.rerank_input(h.chunk)).collect();
        let missing: Vec<&([u8; 32], String)> = inputs
            .iter()
            .filter(|(hash, _)| !cache.contains_key(hash))
            .collect();
        if !missing.is_empty() {
            let refs: Vec<&str> = missing.iter().map(|(_, t)| t.as_str()).collect();
            if let Ok(vectors) = minilm.embed_limited(&refs, self.weights.rerank_tokens) {
                // Rounded as a kept vector is, so that a vector read back from a log ranks
                // exactly as this one.
                for ((hash, _), v) in missing.iter().zip(vectors) {
                    cache.insert(*hash, crate::kept(&v));
                }
            }
        }
        inputs
            .iter()
            .map(|(hash, _)| cache.get(hash).cloned().unwrap_or_default())
            .collect()
    }
}

/// The version of how a re-rank vector is made beyond the model's files, the chunk's hash and
/// [`Weights::rerank_tokens`]: [`rerank_text`]'s rule, [`MiniLm::tokenize`]'s cut, the forward
/// pass, the pooling and the rounding ([`crate::kept`]). A change to any of them must change it.
const RERANK_TEXT_VERSION: u64 = 2;

/// What a re-rank's chunk vector depends on besides the chunk's hash: the model
/// ([`MiniLm::fingerprint`]), [`Weights::rerank_tokens`] and the version of [`rerank_text`].
/// Vectors kept across processes are kept under it ([`crate::VectorLog`]).
pub fn rerank_key(minilm: &MiniLm, weights: &Weights) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(minilm.fingerprint());
    h.update((weights.rerank_tokens as u64).to_le_bytes());
    h.update(RERANK_TEXT_VERSION.to_le_bytes());
    h.finalize().into()
}

/// The text MiniLM reads of a chunk when it re-ranks: its [`searched_text`] (path, then chunk),
/// identifiers cut into words ([`for_embedding`]), of which MiniLM reads the first
/// [`Weights::rerank_tokens`] word pieces.
pub fn rerank_text(path: &str, text: &str) -> String {
    for_embedding(&searched_text(path, text))
}

/// The cosine of two unit vectors (MiniLM's are), clamped to `[0, 1]`: the re-rank's signal.
pub fn unit_cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| x * y)
        .sum::<f32>()
        .clamp(0.0, 1.0)
}

/// The re-ranked scores of a ranking whose hybrid scores are `hybrid` (best first) when MiniLM's
/// cosines of its head are `cosines` (one per head entry, the head being
/// `cosines.len().min(hybrid.len())`): `w.rerank · cosine + (1 − w.rerank) · hybrid / best`
/// (or both min-max normalised over the head, [`Weights::rerank_minmax`]). The entries past the
/// head are scaled under the lowest re-ranked score, so that the scores stay one ranking in
/// `[0, 1]`. The evaluation's index and the host's store re-rank with this one rule.
pub fn rerank_scores(w: &Weights, cosines: &[f32], hybrid: &[f32]) -> Vec<f32> {
    let depth = cosines.len().min(hybrid.len());
    if depth == 0 {
        return hybrid.to_vec();
    }
    let (cosines, head) = (&cosines[..depth], &hybrid[..depth]);
    // Min-max over the head puts both signals on the same scale whatever their spread.
    let spread = |v: &[f32]| {
        let lo = v.iter().copied().fold(f32::INFINITY, f32::min);
        let hi = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        move |x: f32| {
            if !w.rerank_minmax {
                x
            } else if hi > lo {
                (x - lo) / (hi - lo)
            } else {
                1.0
            }
        }
    };
    let (cos_n, hyb_n) = (spread(cosines), spread(head));
    let top = head[0].max(f32::MIN_POSITIVE);
    let mut out: Vec<f32> = cosines
        .iter()
        .zip(head)
        .map(|(&cos, &hyb)| {
            let hyb = if w.rerank_minmax {
                hyb_n(hyb)
            } else {
                hyb / top
            };
            (w.rerank * cos_n(cos) + (1.0 - w.rerank) * hyb).clamp(0.0, 1.0)
        })
        .collect();
    let floor = out.iter().copied().fold(1.0f32, f32::min);
    let last = head[depth - 1].max(f32::MIN_POSITIVE);
    out.extend(
        hybrid[depth..]
            .iter()
            .map(|&score| floor * (score / last).min(1.0)),
    );
    out
}

/// The hybrid score of a chunk from its signals, each in `[0, 1]`: the weighted sum divided by the
/// sum of the weights, so that it lies in `[0, 1]` too. The in-memory index and the persistent
/// store both score with it.
pub(crate) fn combine(
    w: &Weights,
    lexical: f32,
    cosine: f32,
    definition: f32,
    file_name: f32,
) -> f32 {
    let total = (w.bm25 + w.dense + w.definition + w.file_name).max(f32::MIN_POSITIVE);
    (w.bm25 * lexical + w.dense * cosine + w.definition * definition + w.file_name * file_name)
        / total
}

/// A file's score from its best chunk's and its second-best chunk's scores (`None` for a file of
/// one chunk, whose second counts as [`Weights::lone_chunk`] of its best):
/// `(best + w · second) / (1 + w)` with `w` = [`Weights::second_chunk`], in `[0, 1]` when both
/// are.
pub(crate) fn file_score(w: &Weights, best: f32, second: Option<f32>) -> f32 {
    let weight = w.second_chunk.max(0.0);
    let second = second.unwrap_or(best * w.lone_chunk.clamp(0.0, 1.0));
    (best + weight * second) / (1.0 + weight)
}

/// The share of `terms` that are among `words` (0 without terms).
fn share(terms: &[String], words: &[String]) -> f32 {
    if terms.is_empty() {
        0.0
    } else {
        terms.iter().filter(|t| words.contains(t)).count() as f32 / terms.len() as f32
    }
}

/// A unit vector as int8 with one scale: `v[i] ≈ q[i] · scale`.
pub(crate) fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    (v.iter().map(|x| (x / scale).round() as i8).collect(), scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_scores_the_mean_of_its_two_best_chunks() {
        let check = |(second_chunk, lone_chunk): (f32, f32),
                     best: f32,
                     second: Option<f32>,
                     expected: f32| {
            let w = Weights {
                second_chunk,
                lone_chunk,
                ..Weights::default()
            };
            let got = file_score(&w, best, second);
            assert!((got - expected).abs() < 1e-6, "{best}, {second:?}: {got}");
        };
        check((1.0, 0.5), 0.8, Some(0.4), 0.6);
        // One chunk: half of it counts as its second, so it keeps three quarters of its score.
        check((1.0, 0.5), 0.8, None, 0.6);
        // Without the lone share, its missing second counts as nothing; beyond 1 it is 1.
        check((1.0, 0.0), 0.8, None, 0.4);
        check((1.0, 2.0), 0.8, None, 0.8);
        // A second chunk that scored nothing is not a missing one.
        check((1.0, 0.5), 0.8, Some(0.0), 0.4);
        // Two places beat one equally good place.
        check((1.0, 0.5), 0.6, Some(0.6), 0.6);
        // Without the weight, the best chunk alone; a negative weight is none.
        check((0.0, 0.5), 0.8, Some(0.4), 0.8);
        check((-1.0, 0.5), 0.8, Some(0.4), 0.8);
        check((1.0, 0.5), 1.0, Some(1.0), 1.0);
    }

    fn check(cosines: &[f32], hybrid: &[f32], expected: &[f32]) {
        let got = rerank_scores(&Weights::default(), cosines, hybrid);
        assert_eq!(got.len(), expected.len(), "{got:?}");
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() < 1e-6, "{got:?} against {expected:?}");
        }
    }

    #[test]
    fn rerank_scores_mix_the_head_and_scale_the_tail_under_it() {
        // Head: 0.7 · cosine + 0.3 · hybrid / best; tail: the head's lowest · hybrid / head's last.
        check(
            &[0.1, 0.9],
            &[0.8, 0.6, 0.4, 0.2],
            &[0.37, 0.855, 0.37 * 0.4 / 0.6, 0.37 * 0.2 / 0.6],
        );
        // No cosine: the hybrid ranking as it was.
        check(&[], &[0.5, 0.25], &[0.5, 0.25]);
        // More cosines than hits: only the hits are scored.
        check(&[1.0, 1.0, 1.0], &[0.5], &[1.0]);
        // Scores stay in [0, 1].
        check(&[1.0], &[1.0, 1.0], &[1.0, 1.0]);
    }
}
