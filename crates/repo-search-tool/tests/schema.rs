//! The schema is valid JSON Schema 2020-12, advertises exactly the exposed modes, and the tool
//! accepts exactly the argument objects a real validator accepts.

use std::sync::Arc;

use index_contract::{BackendCapabilities, SearchMode, limits::SearchLimits};
use literal_search::LiteralSearch;
use repo_search_tool::{
    IndexedOperationsConfig, IndexedRepositoryOperations, RepoSearchTool, ToolSpec,
};
use serde_json::{Value, json};

fn tool(modes: &[SearchMode]) -> RepoSearchTool {
    let dir = std::env::temp_dir();
    let backend = Arc::new(index_testkit::FixtureBackend::ready([("a", "b")]).with_semantic(true));
    let ops = IndexedRepositoryOperations::new(
        &dir,
        backend,
        Arc::new(LiteralSearch::new(&dir).unwrap()),
        IndexedOperationsConfig {
            allowed_modes: SearchMode::ALL.to_vec(),
            ..Default::default()
        },
    )
    .unwrap();
    RepoSearchTool::new(Arc::new(ops), modes).unwrap()
}

#[test]
fn schema_is_valid_against_the_2020_12_meta_schema() {
    for modes in [
        &[SearchMode::Literal][..],
        &[SearchMode::Literal, SearchMode::IndexedLiteral],
        &SearchMode::ALL,
        &[SearchMode::Semantic],
    ] {
        let schema = tool(modes).schema();
        jsonschema::draft202012::meta::validate(&schema).expect("schema is valid 2020-12");
        // Compiling it also compiles its regular expressions.
        jsonschema::draft202012::new(&schema).expect("schema compiles");
    }
}

#[test]
fn mode_enum_is_exactly_the_exposed_modes() {
    let cases: [(&[SearchMode], Value, &str); 4] = [
        (&[SearchMode::Literal], json!(["literal"]), "literal"),
        (
            &[SearchMode::IndexedLiteral, SearchMode::Literal],
            json!(["indexed_literal", "literal"]),
            "literal",
        ),
        (
            &[SearchMode::IndexedLiteral],
            json!(["indexed_literal"]),
            "indexed_literal",
        ),
        (
            &SearchMode::ALL,
            json!(["literal", "indexed_literal", "semantic"]),
            "literal",
        ),
    ];
    for (modes, expected, default) in cases {
        let schema = tool(modes).schema();
        assert_eq!(schema["properties"]["mode"]["enum"], expected);
        assert_eq!(schema["properties"]["mode"]["default"], default);
    }
}

#[test]
fn a_mode_the_operations_do_not_allow_is_refused_at_construction() {
    let dir = std::env::temp_dir();
    let literal_only: Arc<dyn index_contract::RepositoryOperations> =
        Arc::new(LiteralSearch::new(&dir).unwrap());
    let err = RepoSearchTool::new(literal_only.clone(), &[SearchMode::IndexedLiteral]).unwrap_err();
    assert_eq!(err.code(), index_contract::ErrorCode::Unsupported);
    assert!(RepoSearchTool::new(literal_only, &[]).is_err());
}

#[test]
fn a_spec_built_from_declared_values_is_the_tools_own() {
    // A client without a backend (a binding, the `serve` client) builds the spec from what a
    // server declares and parses arguments and checks answers exactly as the tool does.
    let modes = [SearchMode::IndexedLiteral, SearchMode::Literal];
    let declared = BackendCapabilities {
        regex: true,
        exclude_globs: true,
        ..BackendCapabilities::default()
    };
    let tool = tool_declaring(&modes, declared);
    let spec = ToolSpec::new(
        &[modes[0], modes[1], modes[0]],
        SearchLimits::default(),
        declared,
    )
    .unwrap();
    assert_eq!(&spec, tool.spec());
    assert_eq!(spec.listing(), tool.listing());
    let err = ToolSpec::new(&[], SearchLimits::default(), declared).unwrap_err();
    assert_eq!(err.code(), index_contract::ErrorCode::Unsupported);
}

/// Pools of values for each argument, valid and invalid, of every JSON type.
fn pools() -> Vec<(&'static str, Vec<Value>)> {
    let s = |x: &str| Value::String(x.to_owned());
    vec![
        (
            "query",
            vec![
                s("main"),
                s(""),
                s("a\nb"),
                s("a\rb"),
                s("nul\0"),
                s("tab\there"),
                s(" "),
                s(&"x".repeat(1024)),
                s(&"x".repeat(1025)),
                s(&"é".repeat(1024)),
                s(&"é".repeat(1025)),
                s("日本語"),
                json!(5),
                json!(null),
                json!(["a"]),
                json!({"q": 1}),
                json!(true),
            ],
        ),
        (
            "mode",
            vec![
                s("literal"),
                s("indexed_literal"),
                s("semantic"),
                s("LITERAL"),
                s(""),
                json!(1),
                json!(null),
                json!(["literal"]),
            ],
        ),
        (
            "path",
            vec![
                s("src"),
                s("src/"),
                s(""),
                s("."),
                s("./"),
                s(".."),
                s("../x"),
                s("/etc"),
                s("a//b"),
                s("a/./b"),
                s("a/."),
                s("a/.."),
                s("./a"),
                s("C:/x"),
                s("c:"),
                s("a/C:x"),
                s("a\\b"),
                s("..test"),
                s("a..b"),
                s("..."),
                s("%2e%2e"),
                s("with space/f.rs"),
                s("ünï/日本.rs"),
                s("a\u{202E}b"),
                s("a\u{FF0F}b"),
                s("\u{FF0E}\u{FF0E}"),
                s("a\u{85}b"),
                s("a\tb"),
                s("a\u{7f}"),
                s("a\u{200B}"),
                s("a\u{FEFF}"),
                s(".hidden/x"),
                s("a/b/"),
                s("a/b//"),
                s(&"x".repeat(1024)),
                s(&"x".repeat(1025)),
                s(&"😀".repeat(1024)),
                s("/"),
                json!(3),
                json!(null),
                json!(false),
            ],
        ),
        (
            "max_results",
            vec![
                json!(1),
                json!(0),
                json!(-1),
                json!(1000),
                json!(1001),
                json!(5.0),
                json!(5.5),
                s("5"),
                json!(null),
                json!(true),
                json!(1e300),
                json!(-0.0),
                json!(10000),
                json!(999.0000001),
            ],
        ),
        (
            "case_insensitive",
            vec![json!(true), json!(false), s("true"), json!(1), json!(null)],
        ),
        (
            "regex",
            vec![json!(true), json!(false), s("true"), json!(1), json!(null)],
        ),
        (
            "glob",
            vec![
                json!([]),
                json!(["*.rs"]),
                json!(["src/**", "!*.md"]),
                json!(["!*.md", "!t/**"]),
                json!([""]),
                json!(["a\u{0}"]),
                json!(["x".repeat(1024)]),
                json!(["x".repeat(1025)]),
                json!([1]),
                json!(vec!["*"; 32]),
                json!(vec!["*"; 33]),
                s("*.rs"),
                json!(null),
            ],
        ),
        (
            "type",
            vec![
                json!([]),
                json!(["rust"]),
                json!(["nosuchtype"]),
                json!([""]),
                s("rust"),
            ],
        ),
        (
            "output",
            vec![
                s("content"),
                s("files"),
                s("count"),
                s("COUNT"),
                json!(1),
                json!(null),
            ],
        ),
        (
            "context_before",
            vec![
                json!(0),
                json!(1),
                json!(20),
                json!(21),
                json!(-1),
                json!(2.0),
                s("1"),
            ],
        ),
        (
            "context_after",
            vec![json!(0), json!(3), json!(21), json!(true)],
        ),
        (
            "offset",
            vec![
                json!(0),
                json!(1),
                json!(100_000),
                json!(100_001),
                json!(-1),
                json!(0.5),
            ],
        ),
        (
            "page_token",
            vec![
                s(&format!("p1-{}", "0a".repeat(16))),
                s(&format!("p1-{}", "G".repeat(32))),
                s(""),
                json!(5),
            ],
        ),
        ("include_hidden", vec![json!(true), json!(false), s("yes")]),
        ("multiline", vec![json!(true), json!(false), json!(1)]),
        ("include_ignored", vec![json!(true), json!(false)]),
        ("deadline_ms", vec![json!(10)]),
        ("Query", vec![s("main")]),
    ]
}

#[test]
fn tool_accepts_exactly_what_the_schema_validator_accepts() {
    // Literal honours every option; the fixture backend declares paging and semantic only, so
    // the index modes hold the other options to their neutral values, and `semantic` refuses the
    // matching options whatever is declared. The default mode changes with the list.
    for modes in [
        &[SearchMode::Literal, SearchMode::IndexedLiteral][..],
        &[SearchMode::IndexedLiteral, SearchMode::Literal],
        &[
            SearchMode::Literal,
            SearchMode::IndexedLiteral,
            SearchMode::Semantic,
        ],
        &[SearchMode::Semantic],
    ] {
        tool_agrees_with_the_validator(modes, tool(modes));
    }
    // A backend that takes excluding globs and regexes only.
    let modes = [SearchMode::IndexedLiteral, SearchMode::Literal];
    let partial = BackendCapabilities {
        regex: true,
        exclude_globs: true,
        ..BackendCapabilities::default()
    };
    tool_agrees_with_the_validator(&modes, tool_declaring(&modes, partial));
}

fn tool_agrees_with_the_validator(modes: &[SearchMode], tool: RepoSearchTool) {
    let validator = jsonschema::draft202012::new(&tool.schema()).unwrap();
    let pools = pools();
    let mut rng: u64 = 0x5eed;
    let mut next = move |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    let mut accepted = 0;
    let mut objects: Vec<Value> = vec![json!([]), json!("main"), json!(null), json!(5), json!({})];
    // Every single value of every pool alongside a valid query, so each value is tried alone...
    for (key, values) in &pools {
        for v in values {
            let mut m = serde_json::Map::new();
            if *key != "query" {
                m.insert("query".into(), json!("main"));
            }
            m.insert((*key).into(), v.clone());
            objects.push(Value::Object(m));
        }
    }
    // ...and random combinations.
    for _ in 0..20_000 {
        let mut m = serde_json::Map::new();
        for (key, values) in &pools {
            let p = if *key == "query" {
                9
            } else if *key == "mode" {
                6
            } else if key.starts_with(char::is_uppercase) || *key == "deadline_ms" {
                1
            } else if matches!(*key, "path" | "max_results" | "case_insensitive") {
                4
            } else {
                1
            };
            if next(10) < p {
                m.insert((*key).into(), values[next(values.len())].clone());
            }
        }
        objects.push(Value::Object(m));
    }
    for args in &objects {
        let ours = tool.parse_arguments(args);
        let theirs = validator.is_valid(args);
        assert_eq!(
            ours.is_ok(),
            theirs,
            "disagreement on {args}: ours {ours:?}"
        );
        if ours.is_ok() {
            accepted += 1;
        }
    }
    // A single exposed mode leaves one valid `mode` value in eight, so fewer objects pass there.
    let floor = if modes.len() == 1 { 250 } else { 500 };
    assert!(
        accepted > floor,
        "{modes:?}: only {accepted} accepted: the generator is too hostile to test acceptance"
    );
    assert!(objects.len() - accepted > 500);
}

#[test]
fn argument_errors_name_the_argument() {
    let tool = tool(&[SearchMode::Literal]);
    for (args, arg) in [
        (json!({}), "query"),
        (json!({"query": ""}), "query"),
        (json!({"query": 1}), "query"),
        (json!({"query": "a", "mode": "fast"}), "mode"),
        (json!({"query": "a", "max_results": 0}), "max_results"),
        (json!({"query": "a", "max_results": "10"}), "max_results"),
        (
            json!({"query": "a", "case_insensitive": "yes"}),
            "case_insensitive",
        ),
        (json!({"query": "a", "extra": 1}), "arguments"),
    ] {
        let err = tool.parse_arguments(&args).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!("argument `{arg}`")),
            "{args}: {err}"
        );
    }
    let err = tool
        .parse_arguments(&json!({"query": "a", "path": "../etc"}))
        .unwrap_err();
    assert!(err.to_string().starts_with("path scope refused"), "{err}");
}

fn tool_declaring(modes: &[SearchMode], capabilities: BackendCapabilities) -> RepoSearchTool {
    let dir = std::env::temp_dir();
    let backend = Arc::new(
        index_testkit::FixtureBackend::ready([("a", "b")]).with_capabilities(capabilities),
    );
    let ops = IndexedRepositoryOperations::new(
        &dir,
        backend,
        Arc::new(LiteralSearch::new(&dir).unwrap()),
        IndexedOperationsConfig {
            allowed_modes: modes.to_vec(),
            ..Default::default()
        },
    )
    .unwrap();
    RepoSearchTool::new(Arc::new(ops), modes).unwrap()
}

#[test]
fn each_options_presence_follows_the_capabilities() {
    const OPTIONS: [&str; 10] = [
        "regex",
        "multiline",
        "glob",
        "type",
        "include_hidden",
        "include_ignored",
        "context_before",
        "context_after",
        "offset",
        "page_token",
    ];
    let all = BackendCapabilities {
        semantic: true,
        regex: true,
        file_filters: true,
        exclude_globs: true,
        count: true,
        context: true,
        paging: true,
        hidden_files: true,
        ignored_files: true,
        multiline: true,
    };
    let check =
        |modes: &[SearchMode], caps: BackendCapabilities, present: &[&str], outputs: Value| {
            let schema = tool_declaring(modes, caps).schema();
            let props = schema["properties"].as_object().unwrap();
            for option in OPTIONS {
                assert_eq!(
                    props.contains_key(option),
                    present.contains(&option),
                    "{modes:?} {caps:?}: {option}"
                );
            }
            assert_eq!(
                schema["properties"]["output"]["enum"], outputs,
                "{modes:?} {caps:?}"
            );
        };
    let index = &[SearchMode::IndexedLiteral][..];
    check(
        index,
        BackendCapabilities::default(),
        &[],
        json!(["content", "files"]),
    );
    check(index, all, &OPTIONS, json!(["content", "files", "count"]));
    check(
        index,
        BackendCapabilities {
            regex: true,
            paging: true,
            ..BackendCapabilities::default()
        },
        &["regex", "offset", "page_token"],
        json!(["content", "files"]),
    );
    check(
        index,
        BackendCapabilities {
            exclude_globs: true,
            ..BackendCapabilities::default()
        },
        &["glob"],
        json!(["content", "files"]),
    );
    // Literal honours everything, so a tool that exposes it offers everything.
    check(
        &[SearchMode::Literal, SearchMode::IndexedLiteral],
        BackendCapabilities::default(),
        &OPTIONS,
        json!(["content", "files", "count"]),
    );
    // Semantic never takes the matching options, whatever is declared.
    check(
        &[SearchMode::Semantic],
        all,
        &[
            "glob",
            "type",
            "include_hidden",
            "include_ignored",
            "offset",
            "page_token",
        ],
        json!(["content", "files"]),
    );
}

#[test]
fn a_mode_that_cannot_honour_an_offered_option_is_held_to_its_neutral_value() {
    let tool = tool_declaring(
        &[SearchMode::Literal, SearchMode::IndexedLiteral],
        BackendCapabilities::default(),
    );
    let validator = jsonschema::draft202012::new(&tool.schema()).unwrap();
    for (args, valid) in [
        (json!({"query": "a", "regex": true}), true),
        (
            json!({"query": "a", "mode": "literal", "glob": ["*.rs"]}),
            true,
        ),
        (
            json!({"query": "a", "mode": "indexed_literal", "regex": true}),
            false,
        ),
        (
            json!({"query": "a", "mode": "indexed_literal", "regex": false}),
            true,
        ),
        (
            json!({"query": "a", "mode": "indexed_literal", "glob": ["*.rs"]}),
            false,
        ),
        (
            json!({"query": "a", "mode": "indexed_literal", "glob": []}),
            true,
        ),
        (
            json!({"query": "a", "mode": "indexed_literal", "output": "count"}),
            false,
        ),
        (
            json!({"query": "a", "mode": "indexed_literal", "context_after": 1}),
            false,
        ),
        (
            json!({"query": "a", "mode": "indexed_literal", "offset": 5}),
            false,
        ),
        (
            json!({"query": "a", "context_after": 1, "output": "files"}),
            false,
        ),
    ] {
        assert_eq!(validator.is_valid(&args), valid, "{args}");
        let ours = tool.parse_arguments(&args);
        assert_eq!(ours.is_ok(), valid, "{args}: {ours:?}");
        if let Err(e) = ours {
            assert_eq!(
                e.code(),
                index_contract::ErrorCode::Unsupported,
                "{args}: {e}"
            );
        }
    }
}

/// The schema's `path` pattern refuses every dot, slash and colon look-alike and every invisible
/// character anywhere in a name; the guard alone lets some through inside a name
/// (`Loading….md`). The tool refuses them too, so that every `path` it accepts is one its schema
/// accepts (a fuzzer found an ellipsis the tool took and the schema did not). The converse need
/// not hold: the guard also refuses what reads as a separator only once normalised (NFKC turns
/// `¼` into `1⁄4`), which no pattern can express.
#[test]
fn every_path_the_tool_accepts_its_schema_accepts() {
    let tool = tool(&[SearchMode::Literal]);
    let validator = jsonschema::draft202012::new(&tool.schema()).unwrap();
    let (mut accepted, mut refused_by_both) = (0, 0);
    let astral = [
        '\u{10000}',
        '\u{1F600}',
        '\u{10A50}',
        '\u{E0001}',
        '\u{10FFFF}',
    ];
    for c in ('\u{0}'..='\u{FFFF}').chain(astral) {
        for path in [format!("a{c}b"), format!("{c}"), format!("dir/{c}x.md")] {
            let args = json!({"query": "x", "path": path});
            let (ours, theirs) = (
                tool.parse_arguments(&args).is_ok(),
                validator.is_valid(&args),
            );
            assert!(
                !ours || theirs,
                "the tool accepts {path:?} (U+{:04X})",
                c as u32
            );
            accepted += usize::from(ours);
            refused_by_both += usize::from(!ours && !theirs);
        }
    }
    assert!(accepted > 150_000, "only {accepted} paths accepted");
    assert!(
        refused_by_both > 100,
        "only {refused_by_both} paths refused by both"
    );
}

/// An answer that holds back matching files whose names it cannot carry (`unserved_files`,
/// with their counts) conforms to the output schema that MCP clients validate answers with.
#[cfg(unix)]
#[tokio::test]
async fn an_answer_with_unserved_files_conforms_to_the_output_schema() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join("a.txt"), "needle\n").unwrap();
    std::fs::write(
        root.join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")),
        "needle\n",
    )
    .unwrap();
    std::fs::write(root.join("evil\u{202E}txt.exe"), "needle\n").unwrap();
    let ops = IndexedRepositoryOperations::new(
        root,
        Arc::new(index_testkit::FixtureBackend::ready([("a", "b")])),
        Arc::new(LiteralSearch::new(root).unwrap()),
        IndexedOperationsConfig::default(),
    )
    .unwrap();
    let tool = RepoSearchTool::new(Arc::new(ops), &[SearchMode::Literal]).unwrap();
    let answer = tool.call(&json!({ "query": "needle" })).await.unwrap();
    assert_eq!(answer["stopped"], "unserved_files", "{answer}");
    assert_eq!(
        answer["stats"]["files_skipped"]["non_utf8_path"], 1,
        "{answer}"
    );
    assert_eq!(
        answer["stats"]["files_skipped"]["refused_path"], 1,
        "{answer}"
    );
    let validator = jsonschema::draft202012::new(&tool.output_schema()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&answer)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}: {answer}");
}
