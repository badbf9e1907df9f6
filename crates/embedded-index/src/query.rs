//! Answering a query from one committed snapshot: trigram candidates, exact verification, rank.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Instant;

use index_contract::{
    BackendHit, BackendSearchResponse, FileFilter, IndexState, IndexStatus, SearchRequest,
    SkippedFiles, limits::DEFAULT_MAX_RESULTS,
};
use search_profile::rank::{self, MatchShape, Prior};
use search_profile::{ContextConfig, PathFilter, PathKey, QueryControl, SearchControl};

use crate::dircache::DirCache;
use crate::plan::{self, Plan};
use crate::segment::{Segment, flags};
use crate::snapshot::Snapshot;
use crate::verify::{self, Verified};
use crate::{EmbeddedIndex, EmbeddedIndexError, parallel};

/// A candidate: its path prior's step, path and flags.
struct Candidate<'a> {
    prior: u8,
    path: &'a str,
    flags: u8,
}

impl Candidate<'_> {
    fn prior(&self) -> Prior {
        Prior::from_step(self.prior)
    }
}

/// Where a long query stopped verifying: the candidate it reached and the matches found before it,
/// in candidate order. The facade asks for page `k` as the first `k * size` hits, so without this
/// every page would verify again from the first candidate, and a person paging through a common
/// query would pay for the whole answer once per page. It is kept for one query at a time, only for
/// the snapshot it was taken on (the candidate order is a function of the snapshot and the query),
/// and only when no walk added candidates (a walk can differ from one call to the next).
pub(crate) struct Cursor {
    snapshot: Weak<Snapshot>,
    fingerprint: String,
    at: usize,
    matches: Vec<BackendHit>,
    skipped: SkippedFiles,
}

/// The options that decide the candidates and how each is verified; not the cap or the deadline.
fn fingerprint(request: &SearchRequest) -> String {
    format!(
        "{:?}",
        (
            &request.query,
            request.regex,
            request.case_insensitive,
            request.multiline,
            &request.path,
            &request.files,
            request.output,
            request.context,
        )
    )
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
        let matcher =
            search_profile::request_matcher(request).map_err(|_| EmbeddedIndexError::BadQuery)?;
        let filter = if request.files.narrows() {
            Some(PathFilter::new(&request.files).map_err(|_| EmbeddedIndexError::BadQuery)?)
        } else {
            None
        };
        let scope = request.path.as_deref();
        // The index holds ripgrep's default selection plus hidden files. A type or `--hidden`
        // selects among them by name; an include glob can select files the ignore rules skip,
        // and `--no-ignore` does, so those requests walk the worktree with their own selection,
        // and the walk says which files are selected (docs/embedded-index.md, "Hidden and ignored
        // files").
        let widens = search_profile::selects_beyond_held(&request.files);
        let control = QueryControl::new(started, request.deadline, &request.signal);
        // An include glob is answered from the index and the directory cache's record of what
        // the walk skipped, when that suffices; otherwise it walks.
        let beyond: Option<Vec<String>> = match &filter {
            Some(filter) if widens => self.glob_selection(&snap, request, filter),
            _ => None,
        };
        let walked: Option<HashSet<String>> = if widens && beyond.is_none() {
            Some(self.walk_selection(request, control.detached())?)
        } else {
            None
        };
        let wanted = |path: &str| {
            scope.is_none_or(|s| index_guard::is_within(path, s))
                && match &walked {
                    Some(walked) => walked.contains(path),
                    None => {
                        filter.as_ref().is_none_or(|f| f.matches(path))
                            && self.held_file_selected(&snap, &request.files, path)
                    }
                }
        };
        // Candidates: files that may hold a match by the query's trigram plan, in every segment,
        // minus deleted docs. A file the index could not read has no trigrams and cannot be ruled
        // out.
        let plan = plan::request_plan(request);
        let full_scan = plan == Plan::All;
        // Each candidate is one packed key: inverted prior, segment, doc. Sorting the keys orders
        // candidates best prior first, ties in segment order, then path order per segment.
        let mut keys: Vec<u64> = Vec::new();
        for (si, seg) in snap.segments.iter().enumerate() {
            let mut ids: Vec<u32> = match eval(&plan, seg) {
                None => (0..seg.n_docs()).collect(),
                Some(mut acc) => {
                    acc.extend_from_slice(seg.unreadable());
                    acc.sort_unstable();
                    acc.dedup();
                    acc
                }
            };
            ids.retain(|id| !snap.deleted[si].contains(id) && wanted(seg.path(*id)));
            for id in ids {
                let inverted = u64::from(255 - seg.prior(id));
                keys.push((inverted << 56) | ((si as u64) << 32) | u64::from(id));
            }
        }
        keys.sort_unstable();
        let mut candidates: Vec<Candidate<'_>> = keys
            .iter()
            .map(|&k| {
                let (si, id) = (((k >> 32) & 0xFF_FFFF) as usize, k as u32);
                let seg = &snap.segments[si];
                let meta = seg.meta(id);
                Candidate {
                    prior: meta.prior,
                    path: seg.path(id),
                    flags: meta.flags,
                }
            })
            .collect();
        // What the walk, or the glob over skipped files, selected that the snapshot lacks is
        // read from disk and verified as it is.
        let extras: Vec<&str> = walked
            .iter()
            .flatten()
            .chain(beyond.iter().flatten())
            .filter(|p| snap.find(p).is_none())
            .map(String::as_str)
            .collect();
        candidates.extend(extras.iter().map(|path| Candidate {
            prior: Prior::of(path).step(),
            path,
            flags: if index_guard::check_path(path).is_err() {
                flags::REFUSED_NAME
            } else {
                0
            },
        }));
        if !extras.is_empty() {
            candidates.sort_by_key(|c| std::cmp::Reverse(c.prior));
        }
        // The candidate order: prior descending, then path order. Each run of one prior is put in
        // path order when verification reaches it (most queries stop long before the last), in
        // about linear time, since the keys are already in path order per segment.
        let mut ordered = 0;
        let threads = crate::threads(&self.config);
        let worktree = self.worktree();
        let context = ContextConfig {
            before: request.context.before as usize,
            after: request.context.after as usize,
            line_bytes: verify::SNIPPET_WINDOW,
        };
        let output = request.output;
        // The answer is the first `cap` hits of the paging order (see [`RANK_BLOCK`]): hit
        // number `cap` lies in block `last`, so the blocks before it are needed whole and block
        // `last` up to its `cap - last * RANK_BLOCK` best hits.
        let last = cap.saturating_sub(1) / RANK_BLOCK;
        let closed = (last + 1) * RANK_BLOCK;
        let in_last = cap - (last * RANK_BLOCK).min(cap);
        let mut matches: Vec<BackendHit> = Vec::new();
        let mut skipped = SkippedFiles::default();
        let mut complete = true;
        let mut at = 0;
        let fingerprint = fingerprint(request);
        // A walk can differ from one call to the next, so its candidates are never resumed.
        let resumable = !widens;
        if resumable {
            let mut slot = self.cursor.lock().unwrap_or_else(|p| p.into_inner());
            let same = slot.as_ref().is_some_and(|c| {
                c.fingerprint == fingerprint
                    && c.snapshot.upgrade().is_some_and(|s| Arc::ptr_eq(&s, &snap))
            });
            if same && let Some(c) = slot.take() {
                matches = c.matches;
                at = c.at;
                skipped = c.skipped;
                complete = c.skipped.unserved() == 0;
            }
        }
        // Verify in candidate order, a chunk at a time across threads, until the blocks are known.
        while at < candidates.len() && cap > 0 && matches.len() < closed {
            if control.should_stop() {
                complete = false;
                break;
            }
            let want = if matches.len() < cap {
                cap - matches.len()
            } else {
                closed - matches.len()
            };
            let chunk = want.clamp(16, 512) * threads;
            let end = (at + chunk).min(candidates.len());
            while ordered < end {
                let prior = candidates[ordered].prior;
                let run = candidates[ordered..]
                    .iter()
                    .position(|c| c.prior != prior)
                    .map_or(candidates.len(), |n| ordered + n);
                candidates[ordered..run].sort_by(|a, b| PathKey::compare(a.path, b.path));
                ordered = run;
            }
            let found = parallel::map(
                &candidates[at..end],
                threads,
                || verify::searcher(context),
                |_, c, s| verify::first_match(s, &matcher, &worktree, c.path, output, &control),
            )?;
            for (i, v) in found.into_iter().enumerate() {
                let c = &candidates[at + i];
                match v {
                    Verified::Match(_) if c.flags & flags::REFUSED_NAME != 0 => {
                        // Held but never served: the answer cannot be complete.
                        search_profile::count_unserved(&mut skipped, c.path);
                        complete = false;
                    }
                    Verified::Match(m) => matches.push(BackendHit {
                        path: c.path.to_owned(),
                        line: m.line,
                        column: m.column,
                        score: rank::score(c.prior(), m.shape),
                        snippet: m.snippet,
                        count: m.count,
                        before: m.before,
                        after: m.after,
                    }),
                    Verified::NoMatch => {}
                    Verified::Unreadable => skipped.unreadable += 1,
                }
            }
            at = end;
            if matches.len() >= closed
                || (matches.len() >= cap
                    && at < candidates.len()
                    && last_block_is_settled(
                        &matches[last * RANK_BLOCK..],
                        in_last,
                        candidates[at].prior(),
                    ))
            {
                break;
            }
        }
        let stopped = control.should_stop();
        if stopped {
            complete = false;
        }
        if resumable && !stopped && cap >= RANK_BLOCK && at < candidates.len() {
            // A page of a long answer: keep where it stopped for the next page.
            *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) = Some(Cursor {
                snapshot: Arc::downgrade(&snap),
                fingerprint,
                at,
                matches: matches.clone(),
                skipped,
            });
        }
        if matches.len() > cap || (matches.len() == cap && at < candidates.len()) {
            complete = false;
        }
        matches.truncate(closed);
        for block in matches.chunks_mut(RANK_BLOCK) {
            block.sort_by(rank_order);
        }
        matches.truncate(cap);
        Ok(BackendSearchResponse {
            status,
            hits: matches,
            complete,
            // Only what verification met: binary files and the like are not counted here.
            skipped: (skipped != SkippedFiles::default()).then_some(skipped),
            full_scan,
        })
    }

    /// The files beyond the held selection that `request`'s include globs (`filter`) make
    /// ripgrep search within its scope, without a walk: the ignored files that the last walk
    /// skipped in the directories it entered, as the directory cache recorded them, which the
    /// globs include. The held files are selected as the globs and hidden names say
    /// (`HiddenRules::selects`).
    ///
    /// `None` (walk) for `include_ignored`, when the cache's directories changed or it did not
    /// record what it skipped, or when a glob includes a directory the default walk skips (an
    /// ignored one, or one under a hidden name): ripgrep enters it, and only a walk knows what
    /// lies beneath. An ignored file under a hidden directory is searched only if ripgrep's
    /// default walk enters that directory, which the hidden rules know for the directories on
    /// the way to held files; for another, `None` too.
    fn glob_selection(
        &self,
        snap: &Snapshot,
        request: &SearchRequest,
        filter: &PathFilter,
    ) -> Option<Vec<String>> {
        if request.files.include_ignored {
            return None;
        }
        let cache = self.holding_dircache()?;
        // Agents repeat a glob across queries: the skipped list (thousands of entries on a large
        // tree) is matched once per glob, directory cache and commit, not once per query.
        let memo = {
            let mut slot = snap.glob_memo.lock().unwrap_or_else(|p| p.into_inner());
            match &*slot {
                Some(m) if m.is_for(&cache, &request.files) => m.clone(),
                _ => {
                    let m = Arc::new(GlobMemo {
                        cache: Arc::downgrade(&cache),
                        files: request.files.clone(),
                        found: self.glob_candidates(snap, &cache, &request.files, filter),
                    });
                    *slot = Some(m.clone());
                    m
                }
            }
        };
        let scope = request.path.as_deref();
        let mut beyond = Vec::new();
        for (path, known) in memo.found.as_ref()? {
            if scope.is_some_and(|s| !index_guard::is_within(path, s)) {
                continue;
            }
            if !known {
                return None;
            }
            beyond.push(path.clone());
        }
        Some(beyond)
    }

    /// What [`EmbeddedIndex::glob_selection`] works out before the scope: `None` when only a
    /// walk can answer the globs at all, else each skipped file they select with whether that
    /// is known (`false`: a file under a hidden directory that holds no held file, which only a
    /// walk can judge, so a request whose scope holds one walks).
    fn glob_candidates(
        &self,
        snap: &Snapshot,
        cache: &DirCache,
        files: &FileFilter,
        filter: &PathFilter,
    ) -> Option<Vec<(String, bool)>> {
        let skipped = cache.skipped()?;
        let hidden_matters = !files.include_hidden;
        let skipped_dirs = skipped.iter().filter(|(_, d)| *d).map(|(p, _)| p);
        let hidden_dirs = cache.hidden_directories().filter(|_| hidden_matters);
        if skipped_dirs
            .chain(hidden_dirs)
            .any(|d| filter.includes_directory(d))
        {
            return None;
        }
        let mut found = Vec::new();
        for (path, _) in skipped.iter().filter(|(_, is_dir)| !is_dir) {
            if !filter.matches(path) {
                continue;
            }
            let parent = crate::dircache::parent(path);
            if hidden_matters && search_profile::has_hidden_component(parent) {
                if !cache.hidden_with_files(parent) {
                    found.push((path.to_owned(), false));
                    continue;
                }
                if !self.hidden_rules(snap).enters(parent) {
                    continue;
                }
            }
            found.push((path.to_owned(), true));
        }
        Some(found)
    }

    /// The files `request`'s selection makes ripgrep search within its scope, by a walk with that
    /// selection (an include glob overrides ignore and hidden rules, `--no-ignore` drops the
    /// ignore rules).
    ///
    /// The walk stops entering directories once `stop` says so (the query's deadline or
    /// cancellation), and the verification after it then stops too, so the answer says it is
    /// incomplete: a `--no-ignore` walk into a huge build tree is held to the query's time.
    fn walk_selection(
        &self,
        request: &SearchRequest,
        stop: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Result<HashSet<String>, EmbeddedIndexError> {
        let scope = request.path.clone();
        // Walk from the root and prune, so that ignore rules of parents still apply.
        let selection = search_profile::Selection::new(self.root())
            .threads(crate::threads(&self.config))
            .filter(&request.files)
            .map_err(|_| EmbeddedIndexError::BadQuery)?
            .prune(move |rel, is_dir| {
                !stop()
                    && scope.as_deref().is_none_or(|scope| {
                        index_guard::is_within(rel, scope)
                            || is_dir && index_guard::is_within(scope, rel)
                    })
            });
        let scope = request.path.as_deref();
        Ok(selection
            .files()
            .into_iter()
            .filter(|p| scope.is_none_or(|s| index_guard::is_within(p, s)))
            .collect())
    }
}

/// An include glob's selection beyond the held files, worked out once for a directory cache
/// and a request's file filter (`EmbeddedIndex::glob_selection`), kept with the commit it was
/// worked out against.
pub(crate) struct GlobMemo {
    /// The directory cache it read; a weak reference, so that the memo never keeps a replaced
    /// cache alive, and its address is never another cache's while the memo holds it.
    cache: Weak<DirCache>,
    files: FileFilter,
    found: Option<Vec<(String, bool)>>,
}

impl GlobMemo {
    fn is_for(&self, cache: &Arc<DirCache>, files: &FileFilter) -> bool {
        std::ptr::eq(self.cache.as_ptr(), Arc::as_ptr(cache)) && self.files == *files
    }
}

/// The docs of `seg` that may satisfy `plan`, ascending; `None` for every doc.
fn eval(plan: &Plan, seg: &Segment) -> Option<Vec<u32>> {
    match plan {
        Plan::All => None,
        Plan::Trigram(t) => Some(if seg.count(*t) == 0 {
            Vec::new()
        } else {
            seg.postings(*t)
        }),
        Plan::Or(parts) => {
            let mut out = Vec::new();
            for p in parts {
                out.extend(eval(p, seg)?);
            }
            out.sort_unstable();
            out.dedup();
            Some(out)
        }
        Plan::And(parts) => {
            let mut order: Vec<(usize, &Plan)> = parts.iter().map(|p| (cost(p, seg), p)).collect();
            order.sort_by_key(|&(c, _)| c);
            let mut acc: Option<Vec<u32>> = None;
            for (c, p) in order {
                if let Some(a) = &acc
                    && (a.is_empty() || c / SKIP_RATIO > a.len())
                {
                    // Dropping a part only widens the candidates, which verification then
                    // narrows: past this ratio, decoding the part costs more than verifying the
                    // few files it could rule out.
                    break;
                }
                if let (Some(a), Plan::Trigram(t)) = (&mut acc, p) {
                    // Probing the list for the few candidates left costs far less than
                    // decoding it to intersect.
                    seg.retain_holding(*t, a);
                    continue;
                }
                if let Some(v) = eval(p, seg) {
                    acc = Some(match acc {
                        None => v,
                        Some(a) => intersect(&a, &v),
                    });
                }
            }
            acc
        }
    }
}

/// Decoding a posting entry costs about this many times less than verifying a file.
const SKIP_RATIO: usize = 4096;

/// The posting entries [`eval`] would decode for `plan` in `seg`, at most.
fn cost(plan: &Plan, seg: &Segment) -> usize {
    match plan {
        Plan::All => usize::MAX,
        Plan::Trigram(t) => seg.count(*t),
        Plan::And(parts) => parts
            .iter()
            .map(|p| cost(p, seg))
            .min()
            .unwrap_or(usize::MAX),
        Plan::Or(parts) => parts
            .iter()
            .map(|p| cost(p, seg))
            .fold(0usize, usize::saturating_add),
    }
}

/// Matching files are ranked in consecutive blocks of this many, in candidate order (prior
/// descending, then path order); within a block hits come by score descending, then path order.
/// The first N hits of that order need only the first `ceil(N / RANK_BLOCK)` blocks, so the first
/// hits of any bigger answer are exactly a smaller answer and pages concatenate. An answer of up
/// to this many hits is ranked as a whole.
pub(crate) const RANK_BLOCK: usize = DEFAULT_MAX_RESULTS;

/// The order of hits within a block: score descending, then path order.
fn rank_order(a: &BackendHit, b: &BackendHit) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| PathKey::compare(&a.path, &b.path))
}

/// Whether the `need` best hits of a block whose hits so far are `block` are final: a candidate
/// not verified yet, of prior `next_prior` or lower, can score at most as a whole-word definition
/// at that prior, and the `need`-th best score beats that (strictly, since a tie would be broken
/// by a path that may sort first).
fn last_block_is_settled(block: &[BackendHit], need: usize, next_prior: Prior) -> bool {
    if need == 0 || block.len() < need {
        return need == 0;
    }
    let mut scores: Vec<f64> = block.iter().map(|h| h.score).collect();
    scores.select_nth_unstable_by(need - 1, |a, b| b.total_cmp(a));
    let best_possible = rank::score(next_prior, MatchShape::BEST);
    scores[need - 1] > best_possible
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
