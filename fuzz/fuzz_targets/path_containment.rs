#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| repo_search_fuzz::path_containment(data));
