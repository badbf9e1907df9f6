//! Exact paging: a page is cut from the first `offset + max_results` hits of the answer's
//! deterministic order, and a token proves that the hits before it are the hits earlier pages
//! returned.
//!
//! The token is a 128-bit FNV-1a digest of the request's matching options, the revision the
//! answer was taken at (index modes) and every hit before the next page. A later page recomputes
//! the digest over the hits before it; when they differ, the answer changed (the worktree, the
//! index, or the query), and the page fails with the `Stale` code instead of returning a
//! shifted list. So pages taken at successive `next_offset`s concatenate to exactly one uncapped
//! answer. The digest only detects change; it is not a secret and proves nothing to a third party.

use index_contract::{ErrorCode, IndexError, SearchHit, SearchRequest};

/// One page of an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The hits from `offset` on, at most the page size.
    pub hits: Vec<SearchHit>,
    /// The next page's `offset`, when more hits follow.
    pub next_offset: Option<u64>,
    /// The next page's `page_token`, with `next_offset`.
    pub page_token: Option<String>,
}

const TOKEN_PREFIX: &str = "p1-";

/// Cuts the page at `request.offset` from `window`, the first hits of the answer's order (at most
/// `request.offset + page_size` of them), after checking `request.page_token` against the hits
/// before the page. `more` says whether hits follow the window; only then does the page carry a
/// `next_offset` and a token. `revision` is the revision the window was taken at, if any.
///
/// # Example
///
/// ```
/// use index_contract::{ErrorCode, SearchHit, SearchMode, SearchRequest};
/// use index_guard::paginate;
///
/// let hit = |path: &str| SearchHit {
///     path: path.into(), line: 1, column: 1, snippet: "x".into(), snippet_truncated: false,
///     score: None, count: None, before: None, after: None,
/// };
/// let mut request = SearchRequest::new("x", SearchMode::Literal);
/// let first = paginate(&request, None, vec![hit("a"), hit("b")], 2, true).unwrap();
/// assert_eq!(first.next_offset, Some(2));
///
/// request.offset = 2;
/// request.page_token = first.page_token.clone();
/// let second = paginate(&request, None, vec![hit("a"), hit("b"), hit("c")], 2, false).unwrap();
/// assert_eq!(second.hits.len(), 1);
/// assert_eq!(second.next_offset, None);
///
/// // The worktree changed: `b` is gone, so the second page would have shifted.
/// let changed = paginate(&request, None, vec![hit("a"), hit("c")], 2, false).unwrap_err();
/// assert_eq!(changed.code(), ErrorCode::Stale);
/// ```
pub fn paginate(
    request: &SearchRequest,
    revision: Option<&str>,
    mut window: Vec<SearchHit>,
    page_size: usize,
    more: bool,
) -> Result<Page, IndexError> {
    let offset = request.offset;
    let mut digest = Digest::new(request, revision);
    let before = offset.min(window.len());
    for hit in &window[..before] {
        digest.hit(hit);
    }
    if let Some(token) = &request.page_token {
        check_page_token(token)?;
        if before < offset || *token != digest.token() {
            return Err(IndexError::PageChanged);
        }
    }
    let mut hits = window.split_off(before);
    let more = more || hits.len() > page_size;
    hits.truncate(page_size);
    if !more || hits.is_empty() {
        return Ok(Page {
            hits,
            next_offset: None,
            page_token: None,
        });
    }
    for hit in &hits {
        digest.hit(hit);
    }
    Ok(Page {
        next_offset: Some((offset + hits.len()) as u64),
        page_token: Some(digest.token()),
        hits,
    })
}

/// The token that a page ending after `hits` would carry: what [`paginate`] issues.
pub fn page_token(request: &SearchRequest, revision: Option<&str>, hits: &[SearchHit]) -> String {
    let mut digest = Digest::new(request, revision);
    for hit in hits {
        digest.hit(hit);
    }
    digest.token()
}

/// Checks that `token` has the form [`paginate`] issues (`p1-` and 32 lowercase hex digits), as
/// the tool's schema says; whether it still matches the answer is [`paginate`]'s to judge.
pub fn check_page_token(token: &str) -> Result<(), IndexError> {
    let hex = token.strip_prefix(TOKEN_PREFIX).unwrap_or("");
    if hex.len() == 32
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(IndexError::InvalidArgument {
            argument: "page_token",
            problem: "is not a token this tool issued; send the `page_token` of the previous page unchanged",
            code: ErrorCode::Unsupported,
        })
    }
}

/// 128-bit FNV-1a over length-prefixed fields.
struct Digest(u128);

impl Digest {
    const OFFSET_BASIS: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    fn new(request: &SearchRequest, revision: Option<&str>) -> Digest {
        let mut d = Digest(Self::OFFSET_BASIS);
        // Everything that decides which hits an answer holds and how they look; not the page
        // size, the deadline or the offset, which only decide where a page is cut.
        let files = &request.files;
        d.bytes(request.mode.as_str().as_bytes());
        d.bytes(request.query.as_bytes());
        d.number(u64::from(request.regex));
        d.number(u64::from(request.case_insensitive));
        d.number(u64::from(request.multiline));
        d.bytes(request.path.as_deref().unwrap_or("").as_bytes());
        d.number(u64::from(request.path.is_some()));
        d.strings(&files.globs);
        d.strings(&files.types);
        d.number(u64::from(files.include_hidden));
        d.number(u64::from(files.include_ignored));
        d.bytes(request.output.as_str().as_bytes());
        d.number(u64::from(request.context.before));
        d.number(u64::from(request.context.after));
        d.bytes(revision.unwrap_or("").as_bytes());
        d.number(u64::from(revision.is_some()));
        d
    }

    fn hit(&mut self, hit: &SearchHit) {
        self.bytes(hit.path.as_bytes());
        self.number(hit.line);
        self.number(hit.column);
        self.bytes(hit.snippet.as_bytes());
        self.number(u64::from(hit.snippet_truncated));
        self.number(hit.score.map_or(u64::MAX, f64::to_bits));
        self.number(hit.count.map_or(u64::MAX, |c| c));
        for lines in [&hit.before, &hit.after] {
            match lines {
                None => self.number(u64::MAX),
                Some(lines) => self.strings(lines),
            }
        }
    }

    fn strings(&mut self, list: &[String]) {
        self.number(list.len() as u64);
        for s in list {
            self.bytes(s.as_bytes());
        }
    }

    fn number(&mut self, n: u64) {
        self.raw(&n.to_le_bytes());
    }

    fn bytes(&mut self, b: &[u8]) {
        self.number(b.len() as u64);
        self.raw(b);
    }

    fn raw(&mut self, b: &[u8]) {
        for &byte in b {
            self.0 ^= u128::from(byte);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    fn token(&self) -> String {
        format!("{TOKEN_PREFIX}{:032x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use index_contract::{ErrorCode, SearchHit, SearchMode, SearchRequest};

    use super::{page_token, paginate};

    fn hit(path: &str, line: u64) -> SearchHit {
        SearchHit {
            path: path.into(),
            line,
            column: 1,
            snippet: format!("{path}:{line}"),
            snippet_truncated: false,
            score: None,
            count: None,
            before: None,
            after: None,
        }
    }

    fn answer(n: usize) -> Vec<SearchHit> {
        (0..n).map(|i| hit(&format!("f{i:03}"), 1)).collect()
    }

    /// Pages an answer of `total` hits at `size` per page, each page cut from a window of the
    /// first `offset + size` hits, and returns the concatenation.
    fn page_through(total: usize, size: usize) -> Vec<SearchHit> {
        let full = answer(total);
        let mut request = SearchRequest::new("q", SearchMode::Literal);
        let mut out = Vec::new();
        loop {
            let end = (request.offset + size).min(total);
            let page = paginate(&request, None, full[..end].to_vec(), size, end < total).unwrap();
            out.extend(page.hits);
            match page.next_offset {
                None => return out,
                Some(next) => {
                    request.offset = next as usize;
                    request.page_token = page.page_token;
                }
            }
        }
    }

    #[test]
    fn pages_concatenate_to_the_uncapped_answer() {
        for (total, size) in [(0, 3), (1, 1), (7, 3), (9, 3), (10, 1), (5, 10)] {
            assert_eq!(
                page_through(total, size),
                answer(total),
                "{total} by {size}"
            );
        }
    }

    #[test]
    fn a_page_after_a_change_before_it_fails_stale_and_one_after_it_does_not() {
        let mut request = SearchRequest::new("q", SearchMode::Literal);
        let first = paginate(&request, Some("r1"), answer(4), 2, true).unwrap();
        request.offset = 2;
        request.page_token = first.page_token;
        // A hit after the page boundary changed: the concatenation is still one answer.
        let mut later = answer(4);
        later[3].snippet = "edited".into();
        assert!(paginate(&request, Some("r1"), later, 2, false).is_ok());
        // A hit before it changed, vanished, or the revision moved: stale.
        let mut edited = answer(4);
        edited[1].snippet = "edited".into();
        let mut shorter = answer(4);
        shorter.remove(0);
        for (revision, window) in [
            ("r1", edited),
            ("r1", shorter),
            ("r1", answer(1)),
            ("r2", answer(4)),
        ] {
            let err = paginate(&request, Some(revision), window, 2, false).unwrap_err();
            assert_eq!(err.code(), ErrorCode::Stale);
        }
        // Another query with the same token: refused too.
        let mut other = request.clone();
        other.query = "other".into();
        assert_eq!(
            paginate(&other, Some("r1"), answer(4), 2, false)
                .unwrap_err()
                .code(),
            ErrorCode::Stale
        );
    }

    #[test]
    fn a_malformed_token_is_refused_as_an_argument() {
        let mut request = SearchRequest::new("q", SearchMode::Literal);
        request.offset = 1;
        for token in ["", "p1-", "p1-XYZ", &format!("p1-{}", "A".repeat(32))] {
            request.page_token = Some(token.into());
            let err = paginate(&request, None, answer(3), 1, true).unwrap_err();
            assert_eq!(err.code(), ErrorCode::Unsupported, "{token:?}");
        }
    }

    #[test]
    fn the_token_names_the_hits_before_the_next_page() {
        let request = SearchRequest::new("q", SearchMode::Literal);
        let page = paginate(&request, None, answer(3), 2, true).unwrap();
        assert_eq!(
            page.page_token.unwrap(),
            page_token(&request, None, &answer(2))
        );
        assert_ne!(
            page_token(&request, None, &answer(2)),
            page_token(&request, None, &answer(1))
        );
    }
}
