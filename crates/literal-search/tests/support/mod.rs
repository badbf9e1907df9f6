//! The literal-search tests' shared helpers, which live in `index-testkit` because the embedded
//! index and the facade test against the same generated trees and the same `rg` oracle.
// Each test binary uses a different subset of the helpers.
#![allow(unused_imports)]

pub use index_testkit::{rg::*, tree::*};
