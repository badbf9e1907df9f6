//! MiniLM against an independent reference, and the tokenizer's pure-Rust build against the
//! default one. The model is the one `cargo xtask tools` installs; these tests fail (they do not
//! skip) when it is missing.

use std::path::PathBuf;
use std::sync::OnceLock;

use semantic_index::{BUILTIN_SHA256, MAX_POSITIONS, MiniLm, StaticModel};

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/models/all-minilm-l6-v2")
}

fn model() -> &'static MiniLm {
    static MODEL: OnceLock<MiniLm> = OnceLock::new();
    MODEL.get_or_init(|| {
        MiniLm::load(&model_dir())
            .unwrap_or_else(|e| panic!("{e}: run `cargo xtask tools` to install the model"))
    })
}

/// The first eight values of the embedding, from `reference/minilm_numpy.py` (BERT in float64
/// numpy, no PyTorch), and the token ids from the `tokenizers` Python wheel (its default, onig
/// build).
fn check(text: &str, ids: &[u32], head: [f32; 8]) {
    let encoding = model().tokenizer().encode(text, true).expect("tokenizes");
    assert_eq!(encoding.get_ids(), ids, "ids of {text:?}");
    let v = model().embed(&[text]).expect("embeds").remove(0);
    assert_eq!(v.len(), 384);
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    for (i, (got, want)) in v.iter().zip(head).enumerate() {
        assert!(
            (got - want).abs() < 2e-5,
            "{text:?}[{i}] = {got}, reference {want}"
        );
    }
}

#[test]
fn embeddings_match_the_numpy_reference() {
    check(
        "This is a test sentence.",
        &[101, 2023, 2003, 1037, 3231, 6251, 1012, 102],
        [
            0.0842964, 0.0579537, 0.0044934, 0.1058211, 0.0070834, -0.0178447, -0.016888,
            -0.0152283,
        ],
    );
    check(
        "def parse_args(argv): return argv[1:]",
        &[
            101, 13366, 11968, 3366, 1035, 12098, 5620, 1006, 12098, 2290, 2615, 1007, 1024, 2709,
            12098, 2290, 2615, 1031, 1015, 1024, 1033, 102,
        ],
        [
            0.0082062, -0.0043562, -0.027362, 0.0223688, -0.040452, -0.090905, 0.0861658,
            -0.0229456,
        ],
    );
}

#[test]
fn pure_rust_tokenizer_matches_the_default_build_on_accents_and_scripts() {
    let ids = model()
        .tokenizer()
        .encode("Café naïve 日本語 façade — “quotes” ẞ", true)
        .expect("tokenizes");
    assert_eq!(
        ids.get_ids(),
        [
            101, 7668, 15743, 1864, 1876, 1950, 8508, 1517, 1523, 16614, 1524, 1096, 102
        ]
    );
    let ids = model()
        .tokenizer()
        .encode("parseHTTPResponse snake_case 0x1F", true)
        .expect("tokenizes");
    assert_eq!(
        ids.get_ids(),
        [
            101, 11968, 3366, 11039, 25856, 6072, 26029, 3366, 7488, 1035, 2553, 1014, 2595, 2487,
            2546, 102
        ]
    );
}

#[test]
fn packaged_padding_and_truncation_to_128_are_off_and_inputs_stop_at_max_seq_length() {
    let tokenizer = model().tokenizer();
    let short = tokenizer.encode("word", true).expect("tokenizes");
    assert_eq!(short.get_ids(), [101, 2773, 102], "no padding");
    let long = tokenizer
        .encode("word ".repeat(200), true)
        .expect("tokenizes");
    assert_eq!(long.get_ids().len(), 202, "no truncation at 128");
    let longest = tokenizer
        .encode("word ".repeat(600), true)
        .expect("tokenizes");
    // The packaged sentence_bert_config.json says 256, as sentence-transformers reads it.
    assert_eq!(longest.get_ids().len(), 256, "truncated at max_seq_length");
    assert_eq!(longest.get_ids().last(), Some(&102));
}

#[test]
fn a_model_directory_without_sentence_bert_config_truncates_at_the_positions_only() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(model_dir().join(name), dir.path().join(name)).unwrap();
    }
    let bare = MiniLm::load(dir.path()).expect("loads without sentence_bert_config.json");
    let ids = bare
        .tokenizer()
        .encode("word ".repeat(600), true)
        .expect("tokenizes");
    assert_eq!(ids.get_ids().len(), MAX_POSITIONS);
    std::fs::write(
        dir.path().join("sentence_bert_config.json"),
        r#"{"max_seq_length": "long"}"#,
    )
    .unwrap();
    let refused = MiniLm::load(dir.path())
        .err()
        .expect("a bad length is refused");
    assert!(refused.to_string().contains("max_seq_length"), "{refused}");
}

#[test]
fn a_batch_embeds_each_text_as_it_would_alone() {
    let texts = [
        "open a file",
        "close the socket",
        "open a file",
        "sort a list in place",
    ];
    let batch = model().embed(&texts).expect("embeds");
    for (text, v) in texts.iter().zip(&batch) {
        let alone = model().embed(&[text]).expect("embeds").remove(0);
        let diff = v
            .iter()
            .zip(&alone)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(diff < 1e-5, "{text:?} differs by {diff}");
    }
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(cos(&batch[0], &batch[1]) < cos(&batch[0], &batch[2]));
}

/// `embed_limited` gives the vectors of a model directory whose `max_seq_length` is the limit:
/// the tokenizer's own truncation, `[SEP]` kept. Many texts cut to one length are split into
/// batches per thread, and each still embeds as it would alone.
#[test]
fn a_limited_embedding_is_the_embedding_of_a_shorter_max_seq_length() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(model_dir().join(name), dir.path().join(name)).unwrap();
    }
    std::fs::write(
        dir.path().join("sentence_bert_config.json"),
        r#"{"max_seq_length": 16}"#,
    )
    .unwrap();
    let short = MiniLm::load(dir.path()).expect("loads");
    let texts: Vec<String> = (0..9)
        .map(|i| {
            format!(
                "def handler_{i}(request):\n    return request.body.decode('utf-8').strip().lower()"
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let limited = model().embed_limited(&refs, 16).expect("embeds");
    let reference: Vec<Vec<f32>> = refs
        .iter()
        .map(|t| short.embed(&[t]).expect("embeds").remove(0))
        .collect();
    for (text, (a, b)) in texts.iter().zip(limited.iter().zip(&reference)) {
        let ids = model().tokenize(text, 16).expect("tokenizes");
        assert_eq!(ids.len(), 16);
        assert_eq!(ids.last(), Some(&102), "[SEP] closes the cut text");
        let diff = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(diff < 1e-5, "{text:?} differs by {diff}");
    }
    // A text shorter than the limit is not changed, and no limit is below [CLS] [SEP].
    assert_eq!(model().tokenize("word", 16).unwrap(), [101, 2773, 102]);
    assert_eq!(model().tokenize("word", 0).unwrap(), [101, 102]);
    let whole = model().embed(&refs[..1]).expect("embeds").remove(0);
    assert_ne!(whole, limited[0], "the whole text reads past the cut");
}

/// A model directory of links to the installed files, but with `name` holding `bytes`.
fn with_file(name: &str, bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        if f != name {
            std::os::unix::fs::symlink(model_dir().join(f), dir.path().join(f)).unwrap();
        }
    }
    std::fs::write(dir.path().join(name), bytes).unwrap();
    dir
}

/// Loading a model directory whose `name` holds `bytes` fails with `defect`, naming `blamed`.
fn check_refused(name: &str, bytes: &[u8], blamed: &str, defect: semantic_index::Defect) {
    let dir = with_file(name, bytes);
    match MiniLm::load(dir.path()) {
        Err(semantic_index::Error::Invalid { path, defect: got }) => {
            assert_eq!(path, dir.path().join(blamed), "{name}: {defect:?}");
            assert_eq!(got, defect, "{name}");
        }
        Err(e) => panic!("{name}: expected {defect:?}, got {e}"),
        Ok(_) => panic!("{name}: expected {defect:?}, it loaded"),
    }
}

/// The installed `config.json` with `field` set to `value`.
fn config_with(field: &str, value: serde_json::Value) -> Vec<u8> {
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(model_dir().join("config.json")).unwrap()).unwrap();
    config[field] = value;
    serde_json::to_vec(&config).unwrap()
}

/// The installed weights with their JSON header changed by `edit` (the data kept as it is).
fn weights_with(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let bytes = std::fs::read(model_dir().join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    edit(&mut header);
    let json = serde_json::to_vec(&header).unwrap();
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&json);
    out.extend_from_slice(&bytes[8 + n..]);
    out
}

/// Every size a header of MiniLM's states is checked before anything is allocated for it: a
/// corrupt `config.json`, safetensors header or tokenizer is an error naming the file and the
/// defect, never a panic or an allocation the file asked for.
#[test]
fn corrupt_minilm_headers_are_errors_naming_the_file() {
    use semantic_index::Defect;
    let word = "embeddings.word_embeddings.weight";
    check_refused(
        "config.json",
        &config_with("hidden_size", (u64::from(u32::MAX)).into()),
        "config.json",
        Defect::OutOfRange("hidden_size"),
    );
    check_refused(
        "config.json",
        &config_with("num_attention_heads", 7.into()),
        "config.json",
        Defect::HeadsDoNotDivideHidden,
    );
    check_refused("config.json", b"[]", "config.json", Defect::NotJson);
    // More layers than the weights hold, or another feed-forward width.
    check_refused(
        "config.json",
        &config_with("num_hidden_layers", 7.into()),
        "model.safetensors",
        Defect::MissingTensor,
    );
    check_refused(
        "config.json",
        &config_with("intermediate_size", 1000.into()),
        "model.safetensors",
        Defect::TensorShape,
    );
    let mut huge_header = std::fs::read(model_dir().join("model.safetensors")).unwrap();
    huge_header[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    check_refused(
        "model.safetensors",
        &huge_header,
        "model.safetensors",
        Defect::HeaderTooLarge,
    );
    check_refused(
        "model.safetensors",
        &weights_with(|h| h[word]["shape"] = serde_json::json!([1u64 << 62, 384])),
        "model.safetensors",
        Defect::TensorSizeMismatch,
    );
    check_refused(
        "model.safetensors",
        &weights_with(|h| h[word]["dtype"] = "F16".into()),
        "model.safetensors",
        Defect::TensorSizeMismatch,
    );
    check_refused(
        "model.safetensors",
        &weights_with(|h| h[word]["data_offsets"][1] = 0.into()),
        "model.safetensors",
        Defect::TensorSizeMismatch,
    );
    let mut short = std::fs::read(model_dir().join("model.safetensors")).unwrap();
    short.truncate(short.len() - 4);
    check_refused(
        "model.safetensors",
        &short,
        "model.safetensors",
        Defect::TensorsNotContiguous,
    );
    check_refused(
        "tokenizer.json",
        b"{\"not\": \"a tokenizer\"}",
        "tokenizer.json",
        Defect::NotATokenizer,
    );
}

/// The built-in model is the installed static model quantized, bit for bit, with the installed
/// tokenizer: what `cargo xtask model static` rebuilds. Its vectors stay those of the f32 model.
#[test]
fn the_builtin_model_is_the_installed_static_model_quantized() {
    let dir = model_dir();
    let full = StaticModel::load(&dir)
        .unwrap_or_else(|e| panic!("{e}: run `cargo xtask tools` to build the static model"));
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("static-256-int8.bin");
    let sha = full.quantized().write_file(&file).expect("writes");
    assert_eq!(sha, BUILTIN_SHA256);
    assert!(std::fs::read(&file).unwrap() == StaticModel::builtin_bytes());
    assert!(
        std::fs::read(dir.join("tokenizer.json")).unwrap()
            == StaticModel::builtin_tokenizer_bytes()
    );
    let builtin = StaticModel::builtin().expect("loads");
    for text in [
        "read the configuration file",
        "fn parse_args(argv: &[String]) -> Result<Options, Error>",
        "def bubble_sort(values): return sorted(values)",
    ] {
        let (a, b) = (full.embed(text), builtin.embed(text));
        let cosine: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(cosine > 0.999, "{text:?}: cosine {cosine}");
    }
}
