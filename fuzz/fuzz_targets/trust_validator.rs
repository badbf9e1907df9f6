//! Fuzz target: arbitrary backend hits, scope and caps through the trust gate; see
//! `repo_search_fuzz::trust_validator` for the invariants it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| repo_search_fuzz::trust_validator(data));
