//! The bounded collector that keeps the first N hits in the shared path order.

use std::collections::BTreeMap;

use index_contract::SearchHit;
use search_profile::PathKey;

/// Keeps at most `cap` hits: the smallest by (path, line, column), whatever order files arrive in
/// from the parallel walk. Memory is bounded by `cap` hits.
#[derive(Debug)]
pub(crate) struct Collector {
    cap: usize,
    total: usize,
    files: BTreeMap<PathKey, Vec<SearchHit>>,
    /// Whether any hit was dropped because of the cap. Each file contributes at most `cap + 1`
    /// hits, so this is true exactly when more than `cap` hits exist, whatever order files
    /// arrived in: the answer, `complete` included, does not depend on thread scheduling.
    pub(crate) capped: bool,
}

impl Collector {
    pub(crate) fn new(cap: usize) -> Collector {
        Collector {
            cap,
            total: 0,
            files: BTreeMap::new(),
            capped: false,
        }
    }

    /// Adds one file's hits (already in line order, at most `cap` of them).
    pub(crate) fn add(&mut self, key: PathKey, hits: Vec<SearchHit>) {
        if hits.is_empty() {
            return;
        }
        self.total += hits.len();
        self.files.insert(key, hits);
        while self.total > self.cap {
            self.capped = true;
            let Some(mut last) = self.files.last_entry() else {
                break;
            };
            let over = self.total - self.cap;
            let v = last.get_mut();
            if v.len() <= over {
                self.total -= v.len();
                last.remove();
            } else {
                v.truncate(v.len() - over);
                self.total -= over;
            }
        }
    }

    pub(crate) fn into_hits(self) -> Vec<SearchHit> {
        self.files.into_values().flatten().collect()
    }
}
