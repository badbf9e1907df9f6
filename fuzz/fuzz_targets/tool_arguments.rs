//! Fuzz target: arbitrary JSON bytes as tool arguments; parsing never panics and accepted
//! arguments obey every schema rule (`repo_search_fuzz::tool_arguments`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| repo_search_fuzz::tool_arguments(data));
