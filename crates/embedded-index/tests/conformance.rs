//! The backend conformance suite (`index_testkit::conformance`) on the embedded index.

use std::path::Path;
use std::sync::{Arc, Mutex};

use embedded_index::{EmbeddedIndex, EmbeddedIndexConfig};
use index_contract::{BoxFuture, RepositoryIndexBackend};
use index_testkit::conformance::{self, Subject};

/// Opens each index in a directory of its own, kept until the suite ends.
#[derive(Default)]
struct Embedded {
    stores: Mutex<Vec<tempfile::TempDir>>,
}

impl Subject for Embedded {
    fn open<'a>(
        &'a self,
        root: &'a Path,
        revision: &'a str,
    ) -> BoxFuture<'a, Arc<dyn RepositoryIndexBackend>> {
        Box::pin(async move {
            let store = tempfile::tempdir().unwrap();
            // Small segments, so that queries and updates cross several of them.
            let config = EmbeddedIndexConfig {
                pairs_per_segment: 2000,
                merged_segment_bytes: 0,
                max_small_segments: 2,
                ..EmbeddedIndexConfig::default()
            };
            let index = EmbeddedIndex::with_config(root, store.path(), config).unwrap();
            index.build(revision).unwrap();
            self.stores.lock().unwrap().push(store);
            Arc::new(index) as Arc<dyn RepositoryIndexBackend>
        })
    }
}

#[test]
fn the_embedded_index_passes_the_conformance_suite() {
    let runtime = conformance::runtime();
    let report = runtime.block_on(conformance::run_all(Arc::new(Embedded::default())));
    report.assert_passed(conformance::CHECKS);
}
