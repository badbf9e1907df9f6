//! Answering a query: the SQL pre-filter (`plan`), rows streamed from a portal, exact
//! verification.

use std::io::Cursor;
use std::time::Instant;

use index_contract::{
    BackendHit, BackendSearchResponse, IndexState, RepositoryIndexBackend, SearchRequest,
    SkippedFiles, limits::DEFAULT_MAX_RESULTS,
};
use index_guard::OptionSupport;
use search_profile::rank::{self, MatchShape, Prior};
use search_profile::{FileSearcher, QueryControl, QueryMatcher, SearchControl};
use tokio_postgres::types::ToSql;
use tokio_postgres::{SimpleQueryMessage, Transaction};

use crate::plan::{self, Filter, WordTest};
use crate::{PgIndex, PgIndexError, content};

/// The longest snippet a hit carries; the facade cuts it further to its own cap.
const SNIPPET_WINDOW: usize = 16 * 1024;

/// What verifying one row found.
enum Verified {
    Match(BackendHit),
    NoMatch,
    Unreadable,
}

impl PgIndex {
    /// Answers a query from one snapshot: the status and the rows are read in the same
    /// `REPEATABLE READ` transaction. Hits come in path order (component by component), each
    /// the first match of its file exactly as ripgrep finds it.
    pub async fn search_now(
        &self,
        request: &SearchRequest,
    ) -> Result<BackendSearchResponse, PgIndexError> {
        let started = Instant::now();
        // The facade checks too; a caller of this public method gets the same refusals.
        index_guard::check_options(
            request,
            OptionSupport::Backend(RepositoryIndexBackend::capabilities(self)),
        )
        .map_err(PgIndexError::Refused)?;
        let matcher = search_profile::request_matcher(request).map_err(PgIndexError::Refused)?;
        let cap = request.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
        let timeout = request.deadline.unwrap_or(self.config.read_timeout);
        let filter = plan::filter(&request.query, request.regex, request.case_insensitive);
        let narrows = filter != Filter::All;
        let mut conn = self.pool.get().await?;
        let tx = self.begin_read(&mut conn, timeout).await?;
        // The planner prices `words LIKE p` as one operator call, not the decompression of a
        // file's words that it is. On its own it then reads every file of the repository, by a
        // sequential scan or through the primary key (measured on 2 482 files: 199 ms, where
        // the trigram index took 6 ms and 162 rechecks). No sequential scan, and operators
        // priced 100 times higher, make it take the trigram index.
        tx.batch_execute("SET LOCAL enable_seqscan = off; SET LOCAL cpu_operator_cost = 0.25")
            .await?;
        let status = self.read_status(&tx).await?;
        let mut response = BackendSearchResponse {
            status,
            hits: Vec::new(),
            complete: true,
            skipped: None,
            full_scan: !narrows,
        };
        if response.status.state == IndexState::Empty || cap == 0 {
            tx.commit().await?;
            conn.release();
            return Ok(response);
        }
        let case_insensitive = request.case_insensitive;
        // The trigram index visits each candidate, rechecks it with every pattern's `LIKE`,
        // then sorts; the path-order scan (`files_order`) tests rows by `strpos` (`WordTest`)
        // until `cap` of them are sent, about `cap * rows / candidates` rows if matches were
        // spread evenly. They are not (Linux's first thousand `-EINVAL` files take 27 000 rows
        // in path order, not 5 300), so path order is taken only when `candidates² > cap ·
        // rows`: a dense literal ("static int", "return -EINVAL;") goes in path order, a rare
        // one through the index. Weighting the cheaper `strpos` in, which sent
        // "EXPORT_SYMBOL_GPL(" (6 318 candidates) to path order too, was measured slower
        // (common literal p95 191 ms against 143 ms). A pattern without trigrams is answered in
        // path order: the bounded scan, which stops at the cap.
        let in_path_order = match &filter {
            Filter::All => true,
            Filter::Word(_) | Filter::And(_) => {
                let index_test = WordTest::Like { case_insensitive };
                let (candidates, rows) = self
                    .candidates(&tx, &filter.sql_literal(index_test))
                    .await?;
                candidates * candidates > cap as f64 * rows
            }
            // An alternation: the index (its branches are separate index scans, which the
            // count below does not add up).
            Filter::Or(_) => false,
        };
        if in_path_order {
            tx.batch_execute("SET LOCAL enable_bitmapscan = off")
                .await?;
        }
        // The scope is a file or a directory: `path = scope OR path starts with scope/`.
        let scope = request.path.as_deref().filter(|s| !s.is_empty());
        let below = scope.map(|s| format!("{s}/"));
        let mut patterns = Vec::new();
        // Without the index, each row's words are tested by position, the cheaper test.
        let test = if in_path_order {
            WordTest::Position { case_insensitive }
        } else {
            WordTest::Like { case_insensitive }
        };
        let condition = filter.sql(test, 5, &mut patterns);
        // The columns themselves, not an expression on them: the sort carries their TOAST
        // pointers, and a value is decompressed only when its row is sent. A portal fetched
        // in batches runs in one server process; a statement run whole may use parallel
        // workers, but on 2 cores they compete with this verification, and content crosses
        // their tuple queues: measured slower on Linux (common literal p50 205 ms against
        // 138 ms).
        let sql = format!(
            "SELECT path, content, raw
               FROM repo_search.files
              WHERE tenant_id = $1 AND repo_id = $2 AND {condition}
                AND ($3::text IS NULL OR path = $3 OR starts_with(path, $4))
              ORDER BY sort_key"
        );
        let statement = tx.prepare(&sql).await?;
        let mut params: Vec<&(dyn ToSql + Sync)> =
            vec![&self.config.tenant_id, &self.config.repo_id, &scope, &below];
        params.extend(patterns.iter().map(|p| p as &(dyn ToSql + Sync)));
        let portal = tx.bind(&statement, &params).await?;
        let control = QueryControl::new(started, request.deadline, &request.signal);
        let mut searcher = FileSearcher::new(search_profile::DEFAULT_HEAP_LIMIT, SNIPPET_WINDOW);
        let mut skipped = SkippedFiles::default();
        // Rows are fetched a batch at a time, so a capped query reads little past its last hit.
        let batch = i32::try_from(cap.clamp(16, 256)).unwrap_or(256);
        'fetch: loop {
            let rows = tx.query_portal(&portal, batch).await?;
            let fetched = rows.len();
            for row in &rows {
                if control.should_stop() {
                    response.complete = false;
                    break 'fetch;
                }
                if response.hits.len() >= cap {
                    // More candidates follow: they may hold hits the cap leaves out.
                    response.complete = false;
                    break 'fetch;
                }
                let stored: &str = row.get(0);
                let path = &*content::walk_name(stored);
                let bytes: &[u8] = match row.get::<_, Option<&[u8]>>(2) {
                    Some(raw) => raw,
                    None => row.get::<_, &str>(1).as_bytes(),
                };
                if scope.is_some_and(|s| !index_guard::is_within(path, s)) {
                    continue;
                }
                match verify(&mut searcher, &matcher, path, bytes, &control) {
                    Verified::Match(_) if index_guard::check_path(path).is_err() => {
                        // Held but never served: the answer cannot be complete.
                        search_profile::count_unserved(&mut skipped, path);
                        response.complete = false;
                    }
                    Verified::Match(hit) => response.hits.push(hit),
                    Verified::NoMatch => {}
                    Verified::Unreadable => skipped.unreadable += 1,
                }
            }
            if fetched < batch as usize {
                break;
            }
        }
        if control.should_stop() {
            response.complete = false;
        }
        response.skipped = (skipped != SkippedFiles::default()).then_some(skipped);
        // Closing the transaction drops the portal and whatever rows it did not send.
        tx.commit().await?;
        conn.release();
        Ok(response)
    }
}

impl PgIndex {
    /// How many rows the trigram index yields for `condition` (before the recheck, all
    /// tenants), and about how many rows `files` holds (the planner's estimate). One round
    /// trip: the index scan of an `EXPLAIN ANALYZE` that stops at the first matching row, so it
    /// costs the index lookup and little more.
    async fn candidates(
        &self,
        tx: &Transaction<'_>,
        condition: &str,
    ) -> Result<(f64, f64), PgIndexError> {
        let sql = format!(
            "SELECT reltuples::text FROM pg_class
              WHERE oid = 'repo_search.files'::regclass;
             SET LOCAL enable_indexscan = off;
             EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
             SELECT 1 FROM repo_search.files
              WHERE tenant_id = {} AND repo_id = {} AND {condition} LIMIT 1;
             SET LOCAL enable_indexscan = on",
            self.tenant_literal,
            crate::literal(&self.config.repo_id),
        );
        let mut lines = Vec::new();
        for message in tx.simple_query(&sql).await? {
            if let SimpleQueryMessage::Row(row) = message
                && let Some(text) = row.get(0)
            {
                lines.push(text.to_owned());
            }
        }
        let candidates = index_rows(&lines).unwrap_or(0.0);
        // A table never analyzed says -1: then at least the candidates are rows.
        let rows = lines
            .first()
            .and_then(|r| r.parse::<f64>().ok())
            .unwrap_or(0.0)
            .max(candidates);
        Ok((candidates, rows))
    }
}

/// The rows of the trigram index scan in an `EXPLAIN ANALYZE` text: `Bitmap Index Scan on ...
/// (actual rows=N loops=1)`.
fn index_rows(plan: &[String]) -> Option<f64> {
    let line = plan.iter().find(|l| l.contains("Bitmap Index Scan"))?;
    let after = line.split("actual rows=").nth(1)?;
    after.split(' ').next()?.parse().ok()
}

/// One row's first match, exactly as the literal search would find it in a file with these
/// bytes, scored by the shared rank. The prior is the path's own, not the row's `prior` column,
/// so that a row written under another rule scores as every backend scores it.
fn verify(
    searcher: &mut FileSearcher,
    matcher: &QueryMatcher,
    path: &str,
    bytes: &[u8],
    control: &dyn SearchControl,
) -> Verified {
    let mut found = None;
    let result = searcher.search(matcher, Cursor::new(bytes), control, |m| {
        let body = m.line.strip_suffix(b"\n").unwrap_or(m.line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let lo = m.start.saturating_sub(SNIPPET_WINDOW / 4);
        let hi = (lo + SNIPPET_WINDOW).min(body.len());
        found = Some(BackendHit::new(
            path,
            m.line_number,
            m.column,
            String::from_utf8_lossy(&body[lo.min(hi)..hi]),
            rank::score(Prior::of(path), MatchShape::of(body, m.start, m.end)),
        ));
        false
    });
    match (result, found) {
        (Err(_), _) => Verified::Unreadable,
        (Ok(_), Some(hit)) => Verified::Match(hit),
        (Ok(_), None) => Verified::NoMatch,
    }
}

#[cfg(test)]
mod tests {
    use super::index_rows;

    #[test]
    fn the_trigram_index_rows_are_read_from_the_plan_text() {
        let check = |plan: &[&str], expected: Option<f64>| {
            let plan: Vec<String> = plan.iter().map(|l| (*l).to_owned()).collect();
            assert_eq!(index_rows(&plan), expected, "{plan:?}");
        };
        check(
            &[
                "Limit (actual rows=1 loops=1)",
                "  ->  Bitmap Heap Scan on files (actual rows=1 loops=1)",
                "        ->  Bitmap Index Scan on files_words_trgm (actual rows=3687 loops=1)",
            ],
            Some(3687.0),
        );
        check(&["Limit (actual rows=0 loops=1)", "  ->  Result"], None);
        check(&["Bitmap Index Scan on x (never executed)"], None);
    }
}
