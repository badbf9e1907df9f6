//! The static model's build and file, and the ranking over a small corpus. A static model over
//! the vocabulary's first 3 000 tokens (common English words are among them) keeps this fast; the
//! full build is `cargo xtask model static`.

mod support;

use support::{LIMIT, minilm, model_dir, statics};

use semantic_index::{
    Defect, Document, Error, MiniLm, STATIC_FILE, Scorer, SemanticIndex, StaticModel,
};

/// A directory holding the tokenizer, where a static model can be saved.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        model_dir().join("tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .expect("copy");
    dir
}

#[test]
fn static_build_does_not_depend_on_the_thread_count() {
    let mut one = MiniLm::load(&model_dir()).expect("loads");
    one.set_threads(1);
    let single = StaticModel::build_limited(&one, &model_dir(), LIMIT).expect("builds");
    let (a, b) = (scratch(), scratch());
    assert_eq!(
        single.save(a.path()).expect("saves"),
        statics().save(b.path()).expect("saves")
    );
}

#[test]
fn static_model_round_trips_and_refuses_a_changed_byte() {
    let dir = scratch();
    statics().save(dir.path()).expect("saves");
    let loaded = StaticModel::load(dir.path()).expect("loads");
    let text = "return the list of open files";
    assert_eq!(loaded.embed(text), statics().embed(text));
    let path = dir.path().join(STATIC_FILE);
    let mut bytes = std::fs::read(&path).expect("reads");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes).expect("writes");
    assert!(matches!(
        StaticModel::load(dir.path()),
        Err(Error::Invalid { path: p, defect: Defect::ChecksumMismatch }) if p == path
    ));
}

fn corpus() -> Vec<Document> {
    let doc = |path: &str, text: &str| Document {
        key: path.to_owned(),
        path: path.to_owned(),
        text: text.to_owned(),
    };
    vec![
        doc(
            "net/socket.py",
            "def close_connection(sock):\n    sock.shutdown()\n    sock.close()\n",
        ),
        doc(
            "fs/files.py",
            "def read_lines(path):\n    with open(path) as f:\n        return f.read().splitlines()\n\n\ndef write_text(path, text):\n    with open(path, 'w') as f:\n        f.write(text)\n",
        ),
        doc(
            "math/stats.py",
            "def mean(values):\n    return sum(values) / len(values)\n",
        ),
        doc(
            "ui/colour.py",
            "def parse_colour(name):\n    return COLOURS[name.lower()]\n",
        ),
    ]
}

/// Every ranking puts `expected_first` first, except BM25 when the query shares no word with it
/// (`lexical` false): that gap is what the dense signal is for.
fn check(query: &str, expected_first: &str, lexical: bool) {
    let index = SemanticIndex::build(statics(), corpus());
    for scorer in [Scorer::Bm25, Scorer::Dense, Scorer::Hybrid, Scorer::Rerank] {
        let hits = index.search(query, scorer, Some(minilm()), 10);
        let paths: Vec<&str> = hits
            .iter()
            .map(|h| index.documents()[h.doc].path.as_str())
            .collect();
        if scorer != Scorer::Bm25 || lexical {
            assert_eq!(
                paths.first(),
                Some(&expected_first),
                "{scorer:?} on {query:?}: {paths:?}"
            );
        }
        let mut unique = paths.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), paths.len(), "one hit per document: {paths:?}");
        assert!(
            hits.windows(2).all(|w| w[0].score >= w[1].score),
            "{hits:?}"
        );
        assert!(
            hits.iter().all(|h| (0.0..=1.0).contains(&h.score)),
            "{hits:?}"
        );
    }
}

#[test]
fn each_ranking_finds_the_function_a_description_names() {
    check("read all lines of a file", "fs/files.py", true);
    check("average of some numbers", "math/stats.py", false);
}

#[test]
fn reranking_caches_chunk_vectors_by_content_hash() {
    let index = SemanticIndex::build(statics(), corpus());
    index.search("shut the socket down", Scorer::Rerank, Some(minilm()), 3);
    let cached = index.cached_vectors();
    assert!(cached > 0 && cached <= index.chunks().len());
    index.search("shut the socket down", Scorer::Rerank, Some(minilm()), 3);
    assert_eq!(index.cached_vectors(), cached);
}

/// A chunk is searched under its file's path (`searched_text`): the same function in two files is
/// two chunks of two hashes, MiniLM embeds both, and the path decides between them.
#[test]
fn the_rerank_reads_each_chunk_under_its_file_path() {
    let code =
        "def middle(values):\n    values = sorted(values)\n    return values[len(values) // 2]\n";
    let doc = |path: &str| Document {
        key: path.into(),
        path: path.into(),
        text: code.into(),
    };
    let docs = vec![doc("network/pick.py"), doc("statistics/pick.py")];
    let index = SemanticIndex::build(statics(), docs);
    let query = "the median of a sample of numbers";
    let ranked = |scorer| -> Vec<(String, f32)> {
        index
            .search(query, scorer, Some(minilm()), 10)
            .iter()
            .map(|h| (index.documents()[h.doc].path.clone(), h.score))
            .collect()
    };
    assert_ne!(index.chunks()[0].hash, index.chunks()[1].hash);
    let reranked = ranked(Scorer::Rerank);
    assert_eq!(reranked[0].0, "statistics/pick.py", "{reranked:?}");
    assert!(reranked[0].1 > reranked[1].1, "{reranked:?}");
    assert_eq!(index.cached_vectors(), 2);
}

/// MiniLM reads a chunk's path and first word pieces only (`Weights::rerank_tokens`): two
/// functions that differ past that cut get one vector, and the whole functions two.
#[test]
fn the_rerank_reads_only_the_first_word_pieces_of_a_chunk() {
    let head = "def middle(values):\n    values = sorted(values)\n";
    let doc = |key: &str, tail: &str| Document {
        key: key.into(),
        path: "statistics/pick.py".into(),
        text: format!("{head}    {tail}\n"),
    };
    let docs = vec![
        doc("a", "return values[len(values) // 2] if values else None"),
        doc(
            "b",
            "raise RuntimeError('the socket closed before the handshake')",
        ),
    ];
    let vectors = |rerank_tokens| {
        let weights = semantic_index::rank::Weights {
            rerank_tokens,
            ..Default::default()
        };
        let index = SemanticIndex::build_with(statics(), docs.clone(), weights);
        index.search("the median of a sample", Scorer::Rerank, Some(minilm()), 10);
        let kept = index.minilm_cache();
        assert_eq!(kept.len(), 2, "both chunks were embedded");
        let expected: Vec<Vec<f32>> = (0..2)
            .map(|c| {
                let (_, text) = index.rerank_input(c);
                // As a kept vector is: rounded to half floats.
                semantic_index::kept(
                    &minilm()
                        .embed_limited(&[&text], rerank_tokens)
                        .unwrap()
                        .remove(0),
                )
            })
            .collect();
        let by_chunk: Vec<Vec<f32>> = (0..2)
            .map(|c| {
                let hash = index.chunks()[c].hash;
                kept.iter().find(|(h, _)| *h == hash).unwrap().1.clone()
            })
            .collect();
        for (got, want) in by_chunk.iter().zip(&expected) {
            let diff = got
                .iter()
                .zip(want)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max);
            // A half float's step near MiniLM's largest components is about 1e-4.
            assert!(diff < 2e-4, "vectors of the cut text: {diff}");
        }
        by_chunk
    };
    let apart = |v: &[Vec<f32>]| {
        v[0].iter()
            .zip(&v[1])
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max)
    };
    let cut = vectors(16);
    assert!(
        apart(&cut) < 1e-6,
        "the same first 16 word pieces, the same vector"
    );
    let whole = vectors(256);
    assert!(apart(&whole) > 1e-3, "the whole chunks differ");
}

/// The definition boost reads the names the chunker found in the syntax tree: a C function that
/// returns a pointer to a struct defines its own name, not the struct's (a line rule read
/// `static struct page *alloc_frozen_pages(` as defining `page`).
#[test]
fn the_definition_boost_sees_c_functions_by_their_syntax_tree_names() {
    let doc = |path: &str, text: &str| Document {
        key: path.into(),
        path: path.into(),
        text: text.into(),
    };
    let docs = vec![
        doc(
            "mm/alloc.c",
            "static struct page *alloc_frozen_pages(gfp_t gfp)\n{\n\treturn NULL;\n}\n",
        ),
        doc(
            "mm/user.c",
            "static void do_work(void)\n{\n\talloc_frozen_pages(0);\n\talloc_frozen_pages(1);\n}\n",
        ),
    ];
    // Only the definition boost scores, so a score is the share of the query's terms that a
    // name the chunk defines holds.
    let weights = semantic_index::rank::Weights {
        bm25: 0.0,
        dense: 0.0,
        definition: 1.0,
        file_name: 0.0,
        ..semantic_index::rank::Weights::default()
    };
    let index = SemanticIndex::build_with(statics(), docs, weights);
    let hits = index.search("alloc frozen pages", Scorer::Hybrid, None, 10);
    let scored: Vec<(&str, f32)> = hits
        .iter()
        .map(|h| (index.documents()[h.doc].path.as_str(), h.score))
        .filter(|(_, s)| *s > 0.0)
        .collect();
    assert_eq!(scored, [("mm/alloc.c", 1.0)]);
}
