//! The fuzz check of the model files' headers: the static model's header, MiniLM's `config.json`
//! and the safetensors header, each parsed from raw fuzzer bytes as the loaders parse them.
//!
//! Kept apart from `lib.rs` because it needs `semantic-index`: the fuzz target
//! `model_headers` includes it, and `cargo test -p semantic-index` replays the committed corpus
//! and regressions through it (`crates/semantic-index/tests/fuzz_model_headers.rs`).
//!
//! The first byte picks the parser. For the static model and the safetensors file, the next
//! eight bytes are a claimed file length (any `u64`: the overflows are the point) and the rest
//! the file's first bytes; the safetensors bytes are also parsed as a whole file.

use semantic_index::{
    BertConfig, MAX_HEADS, MAX_HIDDEN, MAX_INTERMEDIATE, MAX_LAYERS, MAX_POSITION_EMBEDDINGS,
    MAX_SAFETENSORS_HEADER, MAX_STATIC_BYTES, MAX_TYPE_VOCAB, MAX_VOCAB, STATIC_DIM, STATIC_HEADER,
    Safetensors, StaticHeader,
};

/// Runs one input through its parser and panics if an accepted header breaks an invariant.
pub fn model_headers(data: &[u8]) {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    match kind % 3 {
        0 => static_header(rest),
        1 => config(rest),
        _ => safetensors(rest),
    }
}

/// A claimed file length and the bytes after it.
fn claimed_len(data: &[u8]) -> (u64, &[u8]) {
    let mut len = [0u8; 8];
    let n = data.len().min(8);
    len[..n].copy_from_slice(&data[..n]);
    (u64::from_le_bytes(len), &data[n..])
}

fn static_header(data: &[u8]) {
    let (file_len, head) = claimed_len(data);
    if let Ok(h) = StaticHeader::parse(head, file_len) {
        assert_eq!(h.dim, STATIC_DIM, "only the supported width is accepted");
        assert!((1..=MAX_VOCAB).contains(&h.vocab), "vocab {}", h.vocab);
        // In u128, where nothing wraps: the file holds exactly the header and the rows.
        let rows = h.vocab as u128 * h.dim as u128 * 4;
        assert_eq!(u128::from(file_len), STATIC_HEADER as u128 + rows);
        assert!(file_len <= MAX_STATIC_BYTES);
        assert!(head.len() >= STATIC_HEADER);
    }
}

fn config(data: &[u8]) {
    let Ok(c) = BertConfig::parse(data) else {
        return;
    };
    assert!((1..=MAX_HIDDEN).contains(&c.hidden));
    assert!((1..=MAX_HEADS).contains(&c.heads));
    assert_eq!(c.hidden % c.heads, 0, "heads divide the hidden size");
    assert!((1..=MAX_LAYERS).contains(&c.layers));
    assert!((1..=MAX_INTERMEDIATE).contains(&c.intermediate));
    assert!((1..=MAX_VOCAB).contains(&c.vocab));
    assert!((2..=MAX_POSITION_EMBEDDINGS).contains(&c.positions));
    assert!((1..=MAX_TYPE_VOCAB).contains(&c.types));
    assert!(c.layer_norm_eps > 0.0 && c.layer_norm_eps < 1.0);
    // The tensors it asks for: every shape non-empty and bounded, so the loader can check each
    // against the file before allocating it.
    let tensors = c.tensors();
    assert_eq!(tensors.len(), 5 + 16 * c.layers);
    for (name, shape) in &tensors {
        let elements: u128 = shape.iter().map(|&d| d as u128).product();
        assert!(elements >= 1, "{name}");
        assert!(
            elements <= (MAX_VOCAB.max(MAX_INTERMEDIATE) * MAX_HIDDEN) as u128,
            "{name}"
        );
    }
}

fn safetensors(data: &[u8]) {
    // As a whole file, and as the head of a file of a claimed length.
    check_safetensors(data, data.len() as u64);
    let (file_len, head) = claimed_len(data);
    check_safetensors(head, file_len);
}

fn check_safetensors(head: &[u8], file_len: u64) {
    let Ok(parsed) = Safetensors::parse(head, file_len) else {
        return;
    };
    let n = Safetensors::header_len(head, file_len).expect("a parsed header has a length");
    assert!(n <= MAX_SAFETENSORS_HEADER);
    let data_start = 8 + n;
    assert!(data_start <= file_len);
    // The tensors cover the data after the header exactly once, in order, each holding exactly
    // its shape's elements.
    let mut at = u128::from(data_start);
    for t in &parsed.tensors {
        assert_eq!(
            u128::from(t.offset),
            at,
            "{} starts where the last ended",
            t.name
        );
        let width: u128 = match t.dtype.as_str() {
            "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" => 1,
            "I16" | "U16" | "F16" | "BF16" => 2,
            "I32" | "U32" | "F32" => 4,
            "I64" | "U64" | "F64" => 8,
            other => panic!("unknown dtype {other:?} accepted"),
        };
        let elements: u128 = t.shape.iter().map(|&d| d as u128).product();
        assert_eq!(u128::from(t.len), width * elements, "{}", t.name);
        at += u128::from(t.len);
    }
    assert_eq!(at, u128::from(file_len), "the tensors end with the file");
}
