//! Answering a query: the SQL pre-filter, rows streamed from a portal, exact verification.

use std::io::Cursor;
use std::time::Instant;

use index_contract::{
    BackendHit, BackendSearchResponse, CancelSignal, IndexState, SearchRequest, SkippedFiles,
    limits::DEFAULT_MAX_RESULTS,
};
use search_profile::{FileSearcher, QueryMatcher, SearchControl};
use tokio_postgres::types::ToSql;

use crate::{PgIndex, PgIndexError, content};

/// The longest snippet a hit carries; the facade cuts it further to its own cap.
const SNIPPET_WINDOW: usize = 16 * 1024;

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
        if request.regex {
            return Err(PgIndexError::Unsupported);
        }
        let matcher = search_profile::matcher(&request.query, request.case_insensitive)
            .map_err(|_| PgIndexError::BadQuery)?;
        let cap = request.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
        let timeout = request.deadline.unwrap_or(self.config.read_timeout);
        let (pattern, narrows) = content::like_pattern(&request.query, request.case_insensitive);
        let mut conn = self.pool.get().await?;
        let tx = self.begin_read(&mut conn, timeout).await?;
        // The planner does not count the cost of detoasting `content`, so on its own it prefers
        // a sequential scan that reads every file (measured: 70 ms where the trigram index
        // takes under 1 ms). With trigrams, the index decides; without, the scan follows path
        // order (`files_order`) so that it stops at the cap: that is the bounded scan.
        tx.batch_execute(if narrows {
            "SET LOCAL enable_seqscan = off"
        } else {
            "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off"
        })
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
        let like = if request.case_insensitive {
            "ILIKE"
        } else {
            "LIKE"
        };
        // The scope is a file or a directory: `path = scope OR path starts with scope/`.
        let scope = request.path.as_deref().filter(|s| !s.is_empty());
        let below = scope.map(|s| format!("{s}/"));
        let sql = format!(
            "SELECT path, coalesce(raw, convert_to(content, 'UTF8')), prior
               FROM repo_search.files
              WHERE tenant_id = $1 AND repo_id = $2 AND content {like} $3
                AND ($4::text IS NULL OR path = $4 OR starts_with(path, $5))
              ORDER BY sort_key"
        );
        let statement = tx.prepare(&sql).await?;
        let params: [&(dyn ToSql + Sync); 5] = [
            &self.config.tenant_id,
            &self.config.repo_id,
            &pattern,
            &scope,
            &below,
        ];
        let portal = tx.bind(&statement, &params).await?;
        let control = Control {
            deadline: request.deadline.map(|d| started + d),
            signal: &request.signal,
        };
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
                let path: &str = row.get(0);
                let bytes: &[u8] = row.get(1);
                let prior: f32 = row.get(2);
                if scope.is_some_and(|s| !index_guard::is_within(path, s)) {
                    continue;
                }
                match verify(&mut searcher, &matcher, path, bytes, prior, &control) {
                    Verified::Match(_) if index_guard::check_path(path).is_err() => {
                        // Held but never served: the answer cannot be complete.
                        skipped.refused_path += 1;
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

/// One row's first match, exactly as the literal search would find it in a file with these
/// bytes.
fn verify(
    searcher: &mut FileSearcher,
    matcher: &QueryMatcher,
    path: &str,
    bytes: &[u8],
    prior: f32,
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
            content::score(prior, body, m.start, m.end),
        ));
        false
    });
    match (result, found) {
        (Err(_), _) => Verified::Unreadable,
        (Ok(_), Some(hit)) => Verified::Match(hit),
        (Ok(_), None) => Verified::NoMatch,
    }
}
