#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| repo_search_fuzz::trust_validator(data));
