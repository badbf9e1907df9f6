//! Fuzz target: arbitrary updates and caps through update validation and routing; see
//! `repo_search_fuzz::update_validation`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| repo_search_fuzz::update_validation(data));
