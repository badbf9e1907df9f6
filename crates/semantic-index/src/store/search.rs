//! Ranking from the store: BM25 from the postings, the IDF-weighted static cosine from the
//! scan, the definition and file-name shares, times the path prior; one hit per file, the head
//! of the ranking.

use crate::prose::{PROSE_PRIOR, Prose};
use crate::rank::{Weights, combine, file_score, quantize};
use crate::segment::{DEFINITION, FILE_NAME, HASH_BYTES, Segment};
use crate::statics::StaticModel;
use crate::text::{name_terms, sub_tokens};
use crate::variants::{VARIANT_PRIOR, Variants};

use super::Store;
use super::scan::{ScanQuery, scan};

/// How much the trigram index's path prior (1 for ordinary source, less for tests, docs and
/// vendored code) weighs: a hit's score is `hybrid · (1 − PRIOR_WEIGHT + PRIOR_WEIGHT · prior)`.
/// Questions about how code works want the code before its tests and its documentation: on
/// semble's questions the mean NDCG@10 was 0.793, 0.804, 0.807 and 0.809 at 0.2, 0.4, 0.6 and
/// 0.8. At 1 a test would score at most 0.6 of its code, so a question about tests still finds
/// them by its words.
pub const PRIOR_WEIGHT: f32 = 0.8;
/// A semantic answer holds at most this many files: ranking by meaning has no match set, so the
/// answer is the head of the ranking.
pub const MAX_ANSWER_FILES: usize = 100;
/// Hits scoring under this share of the best hit's score are left out of the answer.
pub const RELATIVE_FLOOR: f32 = 0.5;

/// How many chunks one job of the cosine scan takes.
const SCAN_BLOCK: usize = 16_384;
/// How many files one job of the file scoring takes.
const FILE_BLOCK: usize = 4_096;

/// A ranked file.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreHit {
    /// Repo-relative path.
    pub path: String,
    /// The best chunk's first non-blank line, 1-based.
    pub line: u64,
    /// That line's text.
    pub snippet: String,
    /// The score, in `[0, 1]`.
    pub score: f32,
    /// The first bytes of the best chunk's [`crate::Chunk::hash`] when the store read it: a
    /// re-rank finds the chunk's text by it, among the chunks of the file as it reads now.
    pub chunk_hash: [u8; HASH_BYTES],
}

impl Store {
    /// The best files for `query`, at most `limit` (and at most [`MAX_ANSWER_FILES`]), among the
    /// paths `keep` accepts: BM25 over identifier sub-tokens, the IDF-weighted static cosine,
    /// definition and file-name boosts combined by `weights` (see [`crate::rank::Weights`]),
    /// per chunk; a file scores its two best chunks (`rank::file_score`), times the path prior
    /// (lowered for variants and prose documents: `Store::lower_by_path`);
    /// one hit per file, at its best chunk; ties in path order.
    pub fn search(
        &self,
        statics: &StaticModel,
        query: &str,
        weights: &Weights,
        keep: &dyn Fn(&str) -> bool,
        limit: usize,
    ) -> Vec<StoreHit> {
        let mut terms = sub_tokens(query);
        terms.sort();
        terms.dedup();
        let qv = query_vector(statics, &self.idf, self.live_chunks, query);
        let (q, qscale) = quantize(&qv);
        // The lexical scores are computed on this thread while the others scan.
        let name_terms = name_terms(&terms);
        let (cosines, cos_top, lexical) =
            self.cosines(&q, qscale, || self.lexical(&terms, &name_terms));
        let Lexical {
            bm25,
            defs,
            names,
            top: top_bm25,
        } = lexical;
        let share = |k: u16| {
            if terms.is_empty() {
                0.0
            } else {
                f32::from(k) / terms.len() as f32
            }
        };
        // Every live file, scored by its best two chunks; paths and the scope are looked at only
        // for the files whose score can reach the answer. Blocks of files are scored on every
        // core, and their hits joined in segment and file order.
        let mut jobs = Vec::new();
        for (si, seg) in self.segments.iter().enumerate() {
            for first in (0..seg.n_files).step_by(FILE_BLOCK) {
                jobs.push((
                    si,
                    first..seg.n_files.min(first.saturating_add(FILE_BLOCK as u32)),
                ));
            }
        }
        let score_files = |(si, files): (usize, std::ops::Range<u32>)| {
            let seg = &self.segments[si];
            let mut hits: Vec<(f32, usize, u32, u32)> = Vec::new();
            for f in files {
                if self.deleted[si][f as usize] {
                    continue;
                }
                let (first, chunks, prior) = seg.file_chunks(f);
                let name = names[si]
                    .get(f as usize)
                    .map_or(0.0, |&k| f32::from(k) / name_terms.len().max(1) as f32);
                let mut top: Option<(f32, u32)> = None;
                let mut second = 0.0f32;
                for c in first..first + chunks {
                    let lexical = if top_bm25 > 0.0 {
                        bm25[si][c as usize] / top_bm25
                    } else {
                        0.0
                    };
                    let cos = cosines[si][c as usize];
                    let cosine = if weights.relative_dense && cos_top > 0.0 {
                        cos / cos_top
                    } else {
                        cos
                    };
                    let definition = share(defs[si].get(c as usize).copied().unwrap_or(0));
                    let s = combine(weights, lexical, cosine, definition, name);
                    match top {
                        Some((b, _)) if s <= b => second = second.max(s),
                        _ => {
                            second = top.map_or(0.0, |(b, _)| b);
                            top = Some((s, c));
                        }
                    }
                }
                let second = (chunks > 1).then_some(second);
                if let Some((s, c)) = top.map(|(b, c)| (file_score(weights, b, second), c)) {
                    let prior = prior.clamp(0.0, 1.0);
                    let score = (s * (1.0 - PRIOR_WEIGHT + PRIOR_WEIGHT * prior)).clamp(0.0, 1.0);
                    if score > 0.0 {
                        hits.push((score, si, f, c));
                    }
                }
            }
            hits
        };
        let (scored, ()) = on_every_core(jobs, score_files, || ());
        let mut best: Vec<(f32, usize, u32, u32)> = scored.concat();
        let wanted = limit.min(MAX_ANSWER_FILES);
        self.lower_by_path(query, &mut best, wanted, keep);
        let path_of = |&(_, si, f, _): &(f32, usize, u32, u32)| self.segments[si].file(f).path;
        let kept = best_kept(&mut best, wanted, |b| b.0, path_of, keep);
        let floor = kept.first().map_or(0.0, |b| b.0 * RELATIVE_FLOOR);
        kept.into_iter()
            .take_while(|b| b.0 >= floor)
            .map(|(score, si, f, c)| {
                let seg = &self.segments[si];
                let chunk = seg.chunk(c);
                let mut chunk_hash = [0; HASH_BYTES];
                chunk_hash.copy_from_slice(seg.chunk_hash(c));
                StoreHit {
                    path: seg.file(f).path.to_owned(),
                    line: u64::from(chunk.snippet_line),
                    snippet: chunk.snippet.to_owned(),
                    score,
                    chunk_hash,
                }
            })
            .collect()
    }

    /// BM25 over the query's `terms`, per segment and chunk; definition-name matches per chunk and
    /// file-name matches per file (allocated only for a segment with a match).
    fn lexical(&self, terms: &[String], name_terms: &[String]) -> Lexical {
        let whole = &self.untouched;
        let n = self.live_chunks.max(1) as f32;
        let live_chunk = |si: usize, seg: &Segment, c: u32| {
            whole[si] || !self.deleted[si][seg.chunk_file(c) as usize]
        };
        // Per segment, per chunk: the BM25 score and the definition matches; per file: name
        // matches (the last two allocated only for a segment that has a match).
        let mut bm25: Vec<Vec<f32>> = self
            .segments
            .iter()
            .map(|s| vec![0.0; s.n_chunks as usize])
            .collect();
        let mut defs: Vec<Vec<u16>> = vec![Vec::new(); self.segments.len()];
        let mut names: Vec<Vec<u16>> = vec![Vec::new(); self.segments.len()];
        let count = |slot: &mut Vec<u16>, size: u32, id: u32| {
            if slot.is_empty() {
                slot.resize(size as usize, 0);
            }
            if let Some(x) = slot.get_mut(id as usize) {
                *x = x.saturating_add(1);
            }
        };
        for t in terms {
            // A segment no commit touched is read in place; another's list is filtered first.
            let lists: Vec<Postings> = self
                .segments
                .iter()
                .enumerate()
                .map(|(si, seg)| match seg.lookup(t) {
                    Some(list) if whole[si] => Postings::InPlace(list),
                    Some(_) => {
                        let mut list = seg.postings(t);
                        list.retain(|&(c, _)| live_chunk(si, seg, c));
                        Postings::Listed(list)
                    }
                    None => Postings::Listed(Vec::new()),
                })
                .collect();
            let df: usize = lists
                .iter()
                .map(|list| match list {
                    Postings::InPlace((_, n)) => *n as usize,
                    Postings::Listed(l) => l.len(),
                })
                .sum();
            if df > 0 {
                let idf = (1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
                for (si, list) in lists.into_iter().enumerate() {
                    let seg = &self.segments[si];
                    let lengths = seg.lengths();
                    let scores = &mut bm25[si];
                    let mut add = |c: u32, tf: u32| {
                        if let (Some(x), Some(&len)) =
                            (scores.get_mut(c as usize), lengths.get(c as usize))
                        {
                            *x += crate::bm25::term_score(idf, tf as f32, len, self.avg_length);
                        }
                    };
                    match list {
                        Postings::InPlace(list) => seg.each_posting(list, &mut add),
                        Postings::Listed(l) => l.into_iter().for_each(|(c, tf)| add(c, tf)),
                    }
                }
            }
            for (si, seg) in self.segments.iter().enumerate() {
                for (c, _) in seg.postings(&format!("{DEFINITION}{t}")) {
                    count(&mut defs[si], seg.n_chunks, c);
                }
            }
        }
        for t in name_terms {
            for (si, seg) in self.segments.iter().enumerate() {
                for (f, _) in seg.postings(&format!("{FILE_NAME}{t}")) {
                    count(&mut names[si], seg.n_files, f);
                }
            }
        }
        let top = bm25.iter().flatten().copied().fold(0.0f32, f32::max);
        Lexical {
            bm25,
            defs,
            names,
            top,
        }
    }

    /// The cosine of every chunk with the quantized query `q` (per segment, per chunk), the
    /// largest among live chunks, and what `beside` returns. The matrices are cut into blocks
    /// that the cores take in turn; this thread runs `beside` first, then takes blocks too.
    fn cosines<R>(
        &self,
        q: &[i8],
        qscale: f32,
        beside: impl FnOnce() -> R,
    ) -> (Vec<Vec<f32>>, f32, R) {
        let query = ScanQuery::new(q, qscale);
        let mut out: Vec<Vec<f32>> = self
            .segments
            .iter()
            .map(|s| vec![0.0; s.n_chunks as usize])
            .collect();
        let mut jobs = Vec::new();
        for (si, (seg, cos)) in self.segments.iter().zip(out.iter_mut()).enumerate() {
            for (b, slot) in cos.chunks_mut(SCAN_BLOCK).enumerate() {
                jobs.push((si, seg, (b * SCAN_BLOCK) as u32, slot));
            }
        }
        let scan_block =
            |(si, seg, base, slot): (usize, &std::sync::Arc<Segment>, u32, &mut [f32])| {
                let start = base as usize * seg.dim;
                let rows = &seg.dense()[start..start + slot.len() * seg.dim];
                scan(slot, rows, seg.dim, &query, seg.scales(base, slot.len()));
                let mut top = 0.0f32;
                for (c, &x) in slot.iter().enumerate() {
                    let live = || {
                        let file = seg.chunk_file(base + c as u32);
                        !self.deleted[si][file as usize]
                    };
                    if x > top && (self.untouched[si] || live()) {
                        top = x;
                    }
                }
                top
            };
        let (tops, beside) = on_every_core(jobs, scan_block, beside);
        let top = tops.into_iter().fold(0.0f32, f32::max);
        (out, top, beside)
    }

    /// Multiplies the path prior of each variant in `best` (another platform's code, a
    /// superseded version: [`crate::variants`]) by [`VARIANT_PRIOR`], and of each prose document
    /// the question does not ask for ([`crate::prose`]) by [`PROSE_PRIOR`], wherever that can
    /// change which `wanted` files of those `keep` accepts rank first, and which pass the floor.
    ///
    /// A file keeps at least `least = 1 − PRIOR_WEIGHT · (1 − VARIANT_PRIOR · PROSE_PRIOR)` of
    /// its score.
    /// Files are looked at best first, a block at a time; the pass stops at the first file whose
    /// score, even unlowered, is under both the `wanted`-th best lowered score of the files
    /// `keep` accepts and the floor's share of the best score times `least`: every file after it
    /// would rank below the answer or under its floor either way, so its path is never read.
    fn lower_by_path(
        &self,
        query: &str,
        best: &mut [(f32, usize, u32, u32)],
        wanted: usize,
        keep: &dyn Fn(&str) -> bool,
    ) {
        let top = best.iter().map(|b| b.0).fold(0.0f32, f32::max);
        let least = 1.0 - PRIOR_WEIGHT * (1.0 - VARIANT_PRIOR * PROSE_PRIOR);
        let reach = top * RELATIVE_FLOOR * least;
        let variants = Variants::new(query, std::env::consts::OS);
        let prose = Prose::new(query);
        // The `wanted` best lowered scores of accepted files, the least on top.
        let mut answer: std::collections::BinaryHeap<std::cmp::Reverse<u32>> =
            std::collections::BinaryHeap::with_capacity(wanted + 1);
        let score = |b: &(f32, usize, u32, u32)| b.0;
        let no_order = |_: &_, _: &_| std::cmp::Ordering::Equal;
        best_first(best, wanted, score, no_order, |head| {
            for (score, si, f, _) in head.iter_mut() {
                let bar = match answer.peek() {
                    Some(std::cmp::Reverse(b)) if answer.len() == wanted => f32::from_bits(*b),
                    _ => 0.0,
                };
                if *score < reach.max(bar) {
                    return false;
                }
                let seg = &self.segments[*si];
                let path = seg.path_bytes(*f);
                let v = variants.prior(path, || self.newest_versions()) * prose.prior(path);
                if v < 1.0 {
                    let prior = seg.file_chunks(*f).2.clamp(0.0, 1.0);
                    let lowered = 1.0 - PRIOR_WEIGHT + PRIOR_WEIGHT * prior * v;
                    *score *= lowered / (1.0 - PRIOR_WEIGHT + PRIOR_WEIGHT * prior);
                }
                if keep(seg.file(*f).path) {
                    // Scores are non-negative: their bits order as they do.
                    answer.push(std::cmp::Reverse(score.to_bits()));
                    if answer.len() > wanted {
                        answer.pop();
                    }
                }
            }
            true
        });
    }
}

/// Runs `work` on each of `jobs` on every core, and returns what each returned, in the order of
/// `jobs`, with what `beside` returned: this thread runs `beside` first, then takes jobs too.
/// A job's panic is passed on to the caller.
fn on_every_core<J: Send, T: Send, R>(
    jobs: Vec<J>,
    work: impl Fn(J) -> T + Sync,
    beside: impl FnOnce() -> R,
) -> (Vec<T>, R) {
    let count = jobs.len();
    let jobs = std::sync::Mutex::new(jobs.into_iter().enumerate());
    // At most a worker per job: this thread is busy with `beside` while they start.
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(count + 1);
    let take = || {
        let mut done = Vec::new();
        loop {
            let job = jobs.lock().ok().and_then(|mut j| j.next());
            let Some((i, job)) = job else {
                break;
            };
            done.push((i, work(job)));
        }
        done
    };
    let (mut done, beside) = std::thread::scope(|s| {
        let workers: Vec<_> = (1..threads).map(|_| s.spawn(take)).collect();
        let beside = beside();
        let mut done = take();
        for w in workers {
            match w.join() {
                Ok(theirs) => done.extend(theirs),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        (done, beside)
    });
    done.sort_unstable_by_key(|&(i, _)| i);
    (done.into_iter().map(|(_, t)| t).collect(), beside)
}

/// The first `wanted` entries of `all` whose path `keep` accepts, by score (descending), equal
/// scores in path order.
fn best_kept<'p, E: Copy>(
    all: &mut [E],
    wanted: usize,
    score: impl Fn(&E) -> f32,
    path: impl Fn(&E) -> &'p str,
    keep: &dyn Fn(&str) -> bool,
) -> Vec<E> {
    let mut kept = Vec::new();
    let in_path_order = |a: &E, b: &E| search_order(path(a), path(b));
    best_first(all, wanted, &score, in_path_order, |head| {
        kept.extend(
            head.iter()
                .filter(|e| keep(path(e)))
                .take(wanted - kept.len())
                .copied(),
        );
        kept.len() < wanted
    });
    kept
}

/// Hands `each` the entries of `all` best first by `score`, a block at a time, until it returns
/// `false` or none are left: each block is the best `4 × wanted` (at least 64) of the rest,
/// grown past entries of its last score (so that equal scores are ordered together), sorted by
/// score, then by `ties`. Only the blocks handed out are sorted: a query scores every file, and
/// the answer needs a few.
fn best_first<E>(
    all: &mut [E],
    wanted: usize,
    score: impl Fn(&E) -> f32,
    ties: impl Fn(&E, &E) -> std::cmp::Ordering,
    mut each: impl FnMut(&mut [E]) -> bool,
) {
    let mut rest = all;
    while !rest.is_empty() {
        let all = std::mem::take(&mut rest);
        let block = all.len().min(4 * wanted.max(64));
        if block < all.len() {
            all.select_nth_unstable_by(block - 1, |a, b| score(b).total_cmp(&score(a)));
        }
        let cut = score(&all[block - 1]);
        let mut end = block;
        for i in block..all.len() {
            if score(&all[i]) == cut {
                all.swap(i, end);
                end += 1;
            }
        }
        let (head, tail) = all.split_at_mut(end);
        head.sort_by(|a, b| score(b).total_cmp(&score(a)).then_with(|| ties(a, b)));
        if !each(head) {
            return;
        }
        rest = tail;
    }
}

/// A term's postings in one segment.
enum Postings {
    /// Where they start in the segment and how many (every one live).
    InPlace((usize, u32)),
    /// The live ones, decoded.
    Listed(Vec<(u32, u32)>),
}

/// The lexical side of a query: see [`Store::lexical`].
struct Lexical {
    bm25: Vec<Vec<f32>>,
    defs: Vec<Vec<u16>>,
    names: Vec<Vec<u16>>,
    top: f32,
}

/// Paths compared component by component, as the trigram index orders them.
fn search_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.split('/').cmp(b.split('/'))
}

/// The IDF-weighted static vector of a text, as the chunks' vectors were made.
fn query_vector(statics: &StaticModel, idf: &[f32], chunks: usize, text: &str) -> Vec<f32> {
    let top = (1.0 + (chunks as f32 + 0.5) / 0.5).ln();
    statics.embed_ids(&statics.token_ids(text), |id| {
        idf.get(id as usize).copied().unwrap_or(top)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::lcg;

    #[test]
    fn the_answer_is_the_best_kept_files_in_score_then_path_order() {
        let mut state = 11;
        for case in 0..200 {
            let n = (lcg(&mut state) % 3000) as usize;
            // Few distinct scores, so that ties are many and cross every block boundary.
            let distinct = 1 + lcg(&mut state) % 40;
            let paths: Vec<String> = (0..n)
                .map(|i| format!("d{}/f{}.c", lcg(&mut state) % 7, i))
                .collect();
            let mut all: Vec<(f32, usize)> = (0..n)
                .map(|i| ((1 + lcg(&mut state) % distinct) as f32 / 64.0, i))
                .collect();
            let refuse = lcg(&mut state) % 4;
            let keep = |p: &str| refuse == 0 || !p.starts_with(&format!("d{refuse}"));
            let wanted = [1, 10, 100][case % 3];
            let mut expected = all.clone();
            expected.sort_by(|a, b| {
                b.0.total_cmp(&a.0)
                    .then_with(|| search_order(&paths[a.1], &paths[b.1]))
            });
            let expected: Vec<(f32, usize)> = expected
                .into_iter()
                .filter(|e| keep(&paths[e.1]))
                .take(wanted)
                .collect();
            let got = best_kept(&mut all, wanted, |e| e.0, |e| paths[e.1].as_str(), &keep);
            assert_eq!(got, expected, "case {case}: {n} files, {distinct} scores");
        }
    }

    #[test]
    fn jobs_on_every_core_answer_in_their_own_order_beside_the_callers_work() {
        for count in [0, 1, 2, 3, 17, 1000] {
            // Jobs of uneven cost, so that the threads finish them out of order.
            let jobs: Vec<u64> = (0..count).collect();
            let work = |j: u64| {
                std::hint::black_box((0..(j * 7919) % 13 * 1000).sum::<u64>());
                j
            };
            let (got, beside) = on_every_core(jobs, work, || "beside");
            assert_eq!(got, (0..count).collect::<Vec<_>>(), "{count} jobs");
            assert_eq!(beside, "beside");
        }
    }

    #[test]
    fn a_job_that_panics_is_passed_on_not_left_out() {
        let caught = std::panic::catch_unwind(|| {
            on_every_core((0..64).collect(), |j: u32| assert_ne!(j, 40), || ())
        });
        assert!(caught.is_err());
    }
}
