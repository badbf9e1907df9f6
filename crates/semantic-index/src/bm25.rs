//! BM25 over identifier sub-tokens ([`crate::sub_tokens`]).

use std::collections::HashMap;

use crate::text::sub_tokens;

/// BM25's term-frequency saturation, the usual value.
const K1: f32 = 1.2;
/// BM25's length normalisation, the usual value.
const B: f32 = 0.75;

/// An in-memory inverted index of chunks.
#[derive(Default)]
pub(crate) struct Bm25 {
    terms: HashMap<String, u32>,
    /// Per term: `(chunk, term frequency)`, chunks ascending.
    postings: Vec<Vec<(u32, u32)>>,
    lengths: Vec<u32>,
}

impl Bm25 {
    /// Adds the next chunk (chunks are numbered in the order they are added).
    pub(crate) fn add(&mut self, text: &str) {
        let id = self.lengths.len() as u32;
        let tokens = sub_tokens(text);
        self.lengths.push(tokens.len() as u32);
        let mut counts: HashMap<u32, u32> = HashMap::new();
        for t in tokens {
            let next = self.terms.len() as u32;
            let term = *self.terms.entry(t).or_insert(next);
            if term as usize == self.postings.len() {
                self.postings.push(Vec::new());
            }
            *counts.entry(term).or_default() += 1;
        }
        for (term, tf) in counts {
            self.postings[term as usize].push((id, tf));
        }
    }

    /// The BM25 score of every chunk for `query` (zero where no term matches). Each distinct query
    /// term counts once.
    pub(crate) fn scores(&self, query: &str) -> Vec<f32> {
        let n = self.lengths.len();
        let mut scores = vec![0.0f32; n];
        if n == 0 {
            return scores;
        }
        let avg = self.lengths.iter().map(|&l| l as f32).sum::<f32>() / n as f32;
        let mut terms = sub_tokens(query);
        terms.sort();
        terms.dedup();
        for t in terms {
            let Some(&term) = self.terms.get(&t) else {
                continue;
            };
            let postings = &self.postings[term as usize];
            let df = postings.len() as f32;
            let idf = (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln();
            for &(chunk, tf) in postings {
                let len = self.lengths[chunk as usize] as f32;
                scores[chunk as usize] += term_score(idf, tf as f32, len, avg);
            }
        }
        scores
    }
}

/// One term's BM25 contribution to a chunk of `len` terms, where chunks average `avg` terms.
pub(crate) fn term_score(idf: f32, tf: f32, len: f32, avg: f32) -> f32 {
    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg.max(1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chunk_naming_the_rare_sub_token_ranks_first() {
        let mut index = Bm25::default();
        for text in [
            "def open_file(path): return path",
            "def close(handle): pass",
            "x = open()",
        ] {
            index.add(text);
        }
        let s = index.scores("which function opens a file?");
        assert!(s[0] > s[2] && s[2] > 0.0 && s[1] == 0.0, "{s:?}");
    }
}
