//! The static model's contrastive fine-tuning: it pulls each query towards its own code, and the
//! same pairs and settings give the same file. A static model over the vocabulary's first 3 000
//! tokens keeps this fast.

use std::path::PathBuf;

use semantic_index::{MiniLm, StaticModel, TUNED_FILE, TuneSettings};

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/models/all-minilm-l6-v2")
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The sum over queries of how far their own code's cosine is above the best other code's.
fn margin(model: &StaticModel, pairs: &[(String, String)]) -> f32 {
    let codes: Vec<Vec<f32>> = pairs.iter().map(|(_, c)| model.embed(c)).collect();
    pairs
        .iter()
        .enumerate()
        .map(|(i, (q, _))| {
            let q = model.embed(q);
            let other = codes
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, c)| dot(&q, c))
                .fold(f32::NEG_INFINITY, f32::max);
            dot(&q, &codes[i]) - other
        })
        .sum()
}

#[test]
fn tuning_pulls_queries_towards_their_code_and_is_reproducible() {
    let minilm = MiniLm::load(&model_dir())
        .unwrap_or_else(|e| panic!("{e}: run `cargo xtask tools` to install the model"));
    let base = StaticModel::build_limited(&minilm, &model_dir(), 3000).expect("builds");
    let pairs: Vec<(String, String)> = [
        (
            "open the file for reading",
            "def open_file(path):\n    return open(path)",
        ),
        (
            "close the network connection",
            "def close_socket(sock):\n    sock.close()",
        ),
        (
            "sort the list of names",
            "def sort_names(names):\n    return sorted(names)",
        ),
        (
            "add two numbers together",
            "def add(a, b):\n    return a + b",
        ),
        (
            "print a message to the user",
            "def say(text):\n    print(text)",
        ),
    ]
    .iter()
    .map(|(q, c)| ((*q).to_owned(), (*c).to_owned()))
    .collect();
    let settings = TuneSettings {
        epochs: 30,
        batch: 5,
        learning_rate: 0.01,
        ..TuneSettings::default()
    };
    let mut losses = Vec::new();
    let tuned = base.tune(&pairs, settings, |_, loss| losses.push(loss));
    assert_eq!(losses.len(), 30);
    assert!(losses[29] < losses[0], "{losses:?}");
    let (before, after) = (margin(&base, &pairs), margin(&tuned, &pairs));
    assert!(after > before + 0.1, "margin {before} -> {after}");
    let again = base.tune(&pairs, settings, |_, _| {});
    let (a, b) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    for dir in [&a, &b] {
        std::fs::copy(
            model_dir().join("tokenizer.json"),
            dir.path().join("tokenizer.json"),
        )
        .expect("copy");
    }
    let sha = tuned.save_as(a.path(), TUNED_FILE).expect("saves");
    assert_eq!(sha, again.save_as(b.path(), TUNED_FILE).expect("saves"));
    let loaded = StaticModel::load_file(a.path(), TUNED_FILE).expect("loads");
    assert_eq!(loaded.embed(&pairs[0].0), tuned.embed(&pairs[0].0));
}
