//! Fuzz target: arbitrary strings through path containment, compared with an independent
//! reference model; see `repo_search_fuzz::path_containment`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| repo_search_fuzz::path_containment(data));
