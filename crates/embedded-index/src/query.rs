//! Answering a query from one committed snapshot: trigram candidates, exact verification, rank.

use std::time::Instant;

use index_contract::{
    BackendHit, BackendSearchResponse, CancelSignal, IndexState, IndexStatus, SearchRequest,
    SkippedFiles, limits::DEFAULT_MAX_RESULTS,
};
use search_profile::SearchControl;

use crate::segment::flags;
use crate::verify::{self, Verified};
use crate::{EmbeddedIndex, EmbeddedIndexError, parallel, trigram};

/// Stops verification at the request's deadline or cancellation.
struct Control<'a> {
    deadline: Option<Instant>,
    signal: &'a CancelSignal,
}

impl SearchControl for Control<'_> {
    fn should_stop(&self) -> bool {
        self.signal.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// A candidate: its path prior, path and flags.
struct Candidate<'a> {
    prior: f64,
    path: &'a str,
    flags: u8,
}

impl EmbeddedIndex {
    /// Answers a query from the latest committed snapshot, taken at its start.
    pub fn search_now(
        &self,
        request: &SearchRequest,
    ) -> Result<BackendSearchResponse, EmbeddedIndexError> {
        let started = Instant::now();
        self.sync();
        let Some(snap) = self.snapshot() else {
            return Ok(BackendSearchResponse {
                status: IndexStatus::new(IndexState::Failed),
                hits: Vec::new(),
                complete: true,
                skipped: None,
                full_scan: false,
            });
        };
        let status = snap.status();
        let cap = request.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
        let matcher = search_profile::matcher(&request.query, request.case_insensitive)
            .map_err(|_| EmbeddedIndexError::BadQuery)?;
        let scope = request.path.as_deref();
        // Candidates: files holding every query trigram, in every segment, minus deleted docs.
        // A file the index could not read has no trigrams and cannot be ruled out.
        let trigrams = trigram::query_trigrams(&request.query, request.case_insensitive);
        // Each candidate is one packed key: inverted prior, segment, doc. Sorting the keys orders
        // candidates best prior first, ties in index order (path order for a fresh build).
        let mut keys: Vec<u64> = Vec::new();
        for (si, seg) in snap.segments.iter().enumerate() {
            let mut ids: Vec<u32> = match &trigrams {
                None => (0..seg.n_docs()).collect(),
                Some(ts) => {
                    let mut order: Vec<u32> = ts.clone();
                    order.sort_by_key(|&t| seg.count(t));
                    let mut acc = seg.postings(order[0]);
                    for &t in &order[1..] {
                        if acc.is_empty() {
                            break;
                        }
                        acc = intersect(&acc, &seg.postings(t));
                    }
                    let unreadable =
                        (0..seg.n_docs()).filter(|&id| seg.meta(id).flags & flags::UNREADABLE != 0);
                    acc.extend(unreadable);
                    acc.sort_unstable();
                    acc.dedup();
                    acc
                }
            };
            ids.retain(|id| {
                !snap.deleted[si].contains(id)
                    && scope.is_none_or(|s| index_guard::is_within(seg.path(*id), s))
            });
            for id in ids {
                let inverted = u64::from(255 - seg.prior(id));
                keys.push((inverted << 56) | ((si as u64) << 32) | u64::from(id));
            }
        }
        keys.sort_unstable();
        let candidates: Vec<Candidate<'_>> = keys
            .iter()
            .map(|&k| {
                let (si, id) = (((k >> 32) & 0xFF_FFFF) as usize, k as u32);
                let seg = &snap.segments[si];
                let meta = seg.meta(id);
                Candidate {
                    prior: f64::from(meta.prior) / 255.0,
                    path: seg.path(id),
                    flags: meta.flags,
                }
            })
            .collect();
        let control = Control {
            deadline: request.deadline.map(|d| started + d),
            signal: &request.signal,
        };
        let threads = crate::threads(&self.config);
        let worktree = self.worktree();
        let mut hits: Vec<(usize, BackendHit)> = Vec::new();
        let mut skipped = SkippedFiles::default();
        let mut complete = true;
        let mut at = 0;
        // Verify in rank order, a block at a time across threads, until the cap is reached.
        while at < candidates.len() {
            if control.should_stop() {
                complete = false;
                break;
            }
            let block = (cap.saturating_sub(hits.len())).clamp(16, 512) * threads;
            let end = (at + block).min(candidates.len());
            let found = parallel::map(
                &candidates[at..end],
                threads,
                verify::searcher,
                |_, c, s| verify::first_match(s, &matcher, &worktree, c.path, &control),
            )?;
            for (i, v) in found.into_iter().enumerate() {
                let c = &candidates[at + i];
                match v {
                    Verified::Match(_) if c.flags & flags::REFUSED_NAME != 0 => {
                        // Held but never served: the answer cannot be complete.
                        skipped.refused_path += 1;
                        complete = false;
                    }
                    Verified::Match(m) => hits.push((
                        at + i,
                        BackendHit {
                            path: c.path.to_owned(),
                            line: m.line,
                            column: m.column,
                            score: crate::rank::score(c.prior, m.shape),
                            snippet: m.snippet,
                            count: None,
                            before: Vec::new(),
                            after: Vec::new(),
                        },
                    )),
                    Verified::NoMatch => {}
                    Verified::Unreadable => skipped.unreadable += 1,
                }
            }
            at = end;
            if hits.len() >= cap {
                break;
            }
        }
        if control.should_stop() {
            complete = false;
        }
        if hits.len() > cap || (hits.len() == cap && at < candidates.len()) {
            complete = false;
        }
        hits.truncate(cap);
        let mut hits: Vec<BackendHit> = hits.into_iter().map(|(_, h)| h).collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(BackendSearchResponse {
            status,
            hits,
            complete,
            // Only what verification met: binary files and the like are not counted here.
            skipped: (skipped != SkippedFiles::default()).then_some(skipped),
            full_scan: false,
        })
    }
}

/// The ascending intersection of two ascending lists.
pub(crate) fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::intersect;

    #[test]
    fn intersection_of_sorted_lists() {
        let check = |a: &[u32], b: &[u32], expected: &[u32]| {
            assert_eq!(intersect(a, b), expected);
            assert_eq!(intersect(b, a), expected);
        };
        check(&[], &[1, 2], &[]);
        check(&[1, 3, 5, 7], &[2, 3, 4, 7, 9], &[3, 7]);
        check(&[1, 2, 3], &[1, 2, 3], &[1, 2, 3]);
    }
}
