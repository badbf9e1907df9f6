//! The counting allocator lives in `index-testkit`; re-exported here for the scale check.

pub use index_testkit::alloc::*;
