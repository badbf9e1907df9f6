//! Fuzz target: arbitrary bytes as a static model header, a MiniLM `config.json` or a safetensors
//! header; parsing never panics and an accepted header describes exactly a file this code can
//! load without allocating past it (`fuzz/src/model_headers.rs`).
#![no_main]

#[path = "../src/model_headers.rs"]
mod model_headers;

libfuzzer_sys::fuzz_target!(|data: &[u8]| model_headers::model_headers(data));
