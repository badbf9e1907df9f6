//! The chunker's tests: one `check(path, source, expected)` per language and shape, and the
//! property that every byte of a file is in exactly one chunk.

use proptest::prelude::*;

use super::syntax::{ALONE_BYTES, MAX_PARSE_BYTES, language_for};
use super::*;

/// The chunks of `source`, read as the file `path`, must have the line ranges and names of
/// `expected`, and must pass [`assert_covers`].
fn check(path: &str, source: &str, expected: &[(u32, u32, &[&str])]) {
    let chunks = chunk_file(path, source);
    let got: Vec<(u32, u32, Vec<&str>)> = chunks
        .iter()
        .map(|c| {
            let names = c.defines.iter().map(String::as_str).collect();
            (c.start_line, c.end_line, names)
        })
        .collect();
    let want: Vec<(u32, u32, Vec<&str>)> = expected
        .iter()
        .map(|&(a, b, names)| (a, b, names.to_vec()))
        .collect();
    assert_eq!(got, want, "chunks of {path}:\n{}", show(&chunks));
    assert_covers(path, source, &chunks);
}

/// The chunks, one header line each and their text, for a failure message.
fn show(chunks: &[Chunk]) -> String {
    chunks
        .iter()
        .map(|c| {
            format!(
                "--- {}-{} {:?} ({} bytes)\n{}",
                c.start_line,
                c.end_line,
                c.defines,
                c.text.len(),
                c.text
            )
        })
        .collect()
}

/// Every byte of `source` is in exactly one chunk, in order; line ranges are 1-based, inclusive
/// and consecutive; hashes are the texts' sha256. A file of blank lines has no chunk.
fn assert_covers(path: &str, source: &str, chunks: &[Chunk]) {
    if source.trim().is_empty() {
        assert!(chunks.is_empty(), "{path}: a blank file has chunks");
        return;
    }
    let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
    assert!(
        joined == source,
        "{path}: the chunks do not hold the file exactly once"
    );
    let mut next_line = 1;
    for c in chunks {
        assert!(!c.text.is_empty(), "{path}: an empty chunk");
        assert_eq!(
            c.start_line, next_line,
            "{path}: line ranges are not consecutive"
        );
        let lines = c.text.split_inclusive('\n').count() as u32;
        assert_eq!(
            c.end_line,
            c.start_line + lines - 1,
            "{path}: wrong end line"
        );
        let searched = format!("{path}\n{}", c.text);
        assert_eq!(
            c.hash,
            <[u8; 32]>::from(Sha256::digest(searched.as_bytes()))
        );
        assert_eq!(c.path, path);
        next_line = c.end_line + 1;
    }
    assert_eq!(next_line - 1, source.split_inclusive('\n').count() as u32);
}

/// `n` lines of `line`: filler that makes a body big enough to stand alone or to split.
fn filler(line: &str, n: usize) -> String {
    line.repeat(n)
}

const RUST_BODY: &str = "        let total = compute(first, second) + other(third, fourth);\n";

#[test]
fn rust_items_are_chunks_and_small_ones_merge() {
    let body = filler(RUST_BODY, 8);
    let src = format!(
        "//! Crate docs.\n\nuse std::io;\n\n/// Parses things.\n#[derive(Debug)]\npub struct Parser {{\n    n: u32,\n}}\n\nfn long_one() {{\n{body}}}\n\nconst LIMIT: u32 = 1;\n\nmacro_rules! twice {{\n    ($e:expr) => {{ $e; $e }};\n}}\n"
    );
    check(
        "src/lib.rs",
        &src,
        &[
            (1, 10, &["Parser"]),
            (11, 21, &["long_one"]),
            (22, 26, &["LIMIT", "twice"]),
        ],
    );
}

#[test]
fn nested_rust_impl_methods_are_chunks_of_their_own() {
    let body = filler(RUST_BODY, 12);
    let src = format!(
        "use std::fmt;\n\nimpl<'a> Parser<'a> {{\n    /// Makes one.\n    pub fn new() -> Self {{\n{body}        Self {{ n: 0 }}\n    }}\n\n    fn parse(&self) {{\n{body}    }}\n\n    fn len(&self) -> usize {{ 0 }}\n}}\n\nfn after() {{}}\n"
    );
    check(
        "src/parser.rs",
        &src,
        &[
            (1, 2, &[]),
            (3, 20, &["Parser", "new"]),
            (21, 35, &["parse"]),
            (36, 38, &["len"]),
            (39, 39, &["after"]),
        ],
    );
}

#[test]
fn a_huge_function_splits_between_lines_and_at_its_statements() {
    let body = filler(RUST_BODY, 100);
    let src = format!("fn huge() {{\n{body}}}\n\nfn next() {{}}\n");
    let chunks = chunk_file("huge.rs", &src);
    assert_covers("huge.rs", &src, &chunks);
    assert!(chunks.len() >= 5, "{}", show(&chunks));
    assert_eq!(chunks[0].defines, ["huge"]);
    assert!(chunks.iter().all(|c| c.text.len() <= TARGET_BYTES));
    assert_eq!(chunks.last().unwrap().defines, ["next"]);
}

#[test]
fn a_huge_string_is_cut_between_lines() {
    let lines = filler("word word word word word word word word word word\n", 100);
    let src = format!("const TEXT: &str = \"\n{lines}\";\n");
    let chunks = chunk_file("text.rs", &src);
    assert_covers("text.rs", &src, &chunks);
    assert!(chunks.len() >= 4, "{}", show(&chunks));
    assert!(chunks.iter().all(|c| c.text.len() <= TARGET_BYTES));
}

#[test]
fn python_decorators_and_class_methods_stay_together() {
    let body = filler(
        "        total = compute(first, second) + other(third)\n",
        14,
    );
    let src = format!(
        "\"\"\"Module docs.\"\"\"\nimport os\nimport sys\n\n\n@dataclass\nclass Point:\n    \"\"\"A point.\"\"\"\n\n    x: int = 0\n\n    @property\n    def norm(self):\n{body}        return total\n\n    @staticmethod\n    def origin():\n{body}        return Point()\n\n    def small(self):\n        return 1\n\n\n@cache\ndef helper(a, b):\n    return a + b\n"
    );
    check(
        "pkg/point.py",
        &src,
        &[
            (1, 5, &[]),
            (6, 11, &["Point"]),
            (12, 29, &["norm"]),
            (30, 47, &["origin"]),
            (48, 51, &["small"]),
            (52, 54, &["helper"]),
        ],
    );
}

#[test]
fn c_function_keeps_its_kernel_doc_comment() {
    let body = filler("\tret = do_something(dev, flags, count);\n", 12);
    let src = format!(
        "#include <linux/module.h>\n#define MAX_DEVS 4\n\nstruct dev_state {{\n\tint count;\n}};\n\n/**\n * dev_probe() - probe a device\n * @dev: the device\n *\n * Return: 0 or an error.\n */\nint dev_probe(struct device *dev)\n{{\n\tint ret;\n{body}\treturn ret;\n}}\n\nstatic char *dev_name_of(int i) {{ return NULL; }}\n"
    );
    check(
        "drivers/dev.c",
        &src,
        &[
            (1, 7, &["MAX_DEVS", "dev_state"]),
            (8, 31, &["dev_probe"]),
            (32, 32, &["dev_name_of"]),
        ],
    );
}

#[test]
fn cpp_class_and_namespace_name_their_members() {
    let body = filler("        total += compute(first, second);\n", 20);
    let src = format!(
        "#include <vector>\n\nnamespace geo {{\n\ntemplate <typename T>\nclass Shape {{\n public:\n    T area() const {{\n        T total = 0;\n{body}        return total;\n    }}\n}};\n\nint Shape<int>::count() {{\n    int total = 0;\n{body}    return total;\n}}\n\n}}  // namespace geo\n"
    );
    check(
        "geo/shape.cpp",
        &src,
        &[
            (1, 2, &[]),
            (3, 33, &["geo", "Shape", "area"]),
            (34, 59, &["Shape::count"]),
        ],
    );
}

#[test]
fn go_functions_and_methods_are_chunks() {
    let body = filler("\ttotal += compute(first, second, third)\n", 12);
    let src = format!(
        "package geo\n\nimport \"fmt\"\n\n// Point is a point.\ntype Point struct {{\n\tX, Y int\n}}\n\n// Norm returns its norm.\nfunc (p Point) Norm() int {{\n\ttotal := 0\n{body}\treturn total\n}}\n\nfunc helper() {{}}\n"
    );
    check(
        "geo/point.go",
        &src,
        &[
            (1, 9, &["Point"]),
            (10, 27, &["Norm"]),
            (28, 28, &["helper"]),
        ],
    );
}

#[test]
fn javascript_classes_and_arrow_functions_are_named() {
    let body = filler("    total += compute(first, second, third);\n", 12);
    let src = format!(
        "import fs from 'fs';\n\nexport class Loader {{\n  load(path) {{\n    let total = 0;\n{body}    return total;\n  }}\n}}\n\nconst parse = (text) => text.split(',');\nfunction* ids() {{ yield 1; }}\n"
    );
    check(
        "src/loader.js",
        &src,
        &[
            (1, 2, &[]),
            (3, 21, &["Loader", "load"]),
            (22, 23, &["parse", "ids"]),
        ],
    );
}

#[test]
fn typescript_interface_and_type_are_chunks() {
    let fields = filler("  field: string;\n", 30);
    let src = format!(
        "import {{ x }} from './x';\n\n/** A shape. */\nexport interface Shape {{\n{fields}  area(): number;\n}}\n\ntype Id = string;\nenum Color {{ Red, Green }}\n"
    );
    check(
        "src/shape.ts",
        &src,
        &[(1, 2, &[]), (3, 37, &["Shape"]), (38, 39, &["Id", "Color"])],
    );
}

#[test]
fn tsx_is_parsed_with_its_own_grammar() {
    let src = "export function App(): JSX.Element {\n  return <div>hello</div>;\n}\n";
    check("ui/app.tsx", src, &[(1, 3, &["App"])]);
}

#[test]
fn java_class_splits_at_its_methods() {
    let body = filler("        total += compute(first, second, third);\n", 16);
    let src = format!(
        "package geo;\n\nimport java.util.List;\n\n/** A point. */\npublic class Point {{\n    private int x;\n\n    public Point(int x) {{ this.x = x; }}\n\n    @Override\n    public int hashCode() {{\n        int total = 0;\n{body}        return total;\n    }}\n\n    @Override\n    public boolean equals(Object o) {{\n        int total = 0;\n{body}        return total == 0;\n    }}\n\n    int getX() {{ return x; }}\n}}\n"
    );
    check(
        "src/geo/Point.java",
        &src,
        &[
            (1, 4, &[]),
            (5, 10, &["Point", "Point"]),
            (11, 32, &["hashCode"]),
            (33, 54, &["equals"]),
            (55, 56, &["getX"]),
        ],
    );
}

#[test]
fn invalid_syntax_falls_back_to_line_merging() {
    let src = "fn broken( {{{ ]]\nlet = = =;\n)))) fn\n\nfn other() {}\n";
    let chunks = chunk_file("broken.rs", src);
    assert_eq!(chunks, line_chunks("broken.rs", src));
    check("broken.rs", src, &[(1, 5, &["broken", "other"])]);
}

#[test]
fn a_c_header_with_one_syntax_error_is_still_parsed() {
    // The include guard holds the whole file: one error inside it must not send it to line
    // merging.
    let src = "#ifndef DEV_H\n#define DEV_H\n\nstruct dev_state {\n\tint count;\n};\n\nstatic int broken = ;\n\nint dev_probe(struct device *dev);\n\n#endif\n";
    assert!(syntax::spans("dev.h", src).is_some());
    check("dev.h", src, &[(1, 12, &["DEV_H", "dev_state"])]);
}

#[test]
fn a_file_over_the_parse_bound_falls_back_to_line_merging() {
    let src = filler("fn f() {}\n", MAX_PARSE_BYTES / 10 + 1);
    assert_eq!(chunk_file("big.rs", &src), line_chunks("big.rs", &src));
}

#[test]
fn languages_are_chosen_by_extension() {
    for (path, known) in [
        ("a/b.rs", true),
        ("x.PY", true),
        ("k.h", true),
        ("k.hpp", true),
        ("m.go", true),
        ("m.mjs", true),
        ("m.tsx", true),
        ("M.java", true),
        ("notes.md", false),
        ("Makefile", false),
        ("dir.rs/README", false),
    ] {
        assert_eq!(language_for(path).is_some(), known, "{path}");
    }
}

#[test]
fn small_definitions_merge_and_big_ones_stand_alone() {
    let small = "def a():\n    return 1\n\n";
    let big = format!(
        "def b():\n{}\n",
        filler("    x = 1\n", ALONE_BYTES / 10 + 1)
    );
    let src = format!("{small}{big}{small}");
    check(
        "m.py",
        &src,
        &[(1, 3, &["a"]), (4, 43, &["b"]), (44, 46, &["a"])],
    );
}

#[test]
fn other_files_are_merged_by_lines() {
    check(
        "f.txt",
        "def a():\n    pass\n\ndef b():\n    pass\n",
        &[(1, 5, &["a", "b"])],
    );
}

#[test]
fn line_blocks_split_where_the_target_is_reached() {
    let body = "    x = 1\n".repeat(100);
    let input = format!("def a():\n{body}\ndef b():\n{body}");
    check("f.txt", &input, &[(1, 102, &["a"]), (103, 203, &["b"])]);
}

#[test]
fn a_line_block_longer_than_the_target_is_cut_between_lines() {
    let input = "x = 1\n".repeat(300);
    check("f.txt", &input, &[(1, 250, &[]), (251, 300, &[])]);
}

#[test]
fn blank_runs_join_a_neighbouring_line_chunk() {
    let input = format!("\n\n{}x = 1\n", " \n".repeat(1000));
    check("f.txt", &input, &[(1, 1003, &[])]);
}

#[test]
fn blank_files_have_no_chunk() {
    check("f.txt", "\n\n  \n", &[]);
    check("f.rs", "\n\n  \n", &[]);
}

#[test]
fn definition_names_are_found_behind_modifiers() {
    for (line, name) in [
        ("pub fn parse_args(x: u8) {", Some("parse_args")),
        ("    async def fetch(self):", Some("fetch")),
        ("class Foo(Bar):", Some("Foo")),
        ("public static class Widget {", Some("Widget")),
        ("x = def_thing()", None),
    ] {
        assert_eq!(definition_name(line), name, "{line:?}");
    }
}

/// The files under `dir` (in its subdirectories too if `deep`) whose names end in one of
/// `extensions`, sorted.
fn files_under(dir: &std::path::Path, extensions: &[&str], deep: bool) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() && deep {
                stack.push(path);
            } else if extensions
                .iter()
                .any(|e| path.to_string_lossy().ends_with(e))
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_byte_is_in_exactly_one_chunk_of_the_workspace_sources() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files = files_under(&root.join("crates"), &[".rs", ".md", ".py", ".toml"], true);
    assert!(files.len() > 50, "only {} files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let path = file.to_string_lossy();
        assert_covers(&path, &text, &chunk_file(&path, &text));
    }
}

#[test]
fn every_byte_is_in_exactly_one_chunk_of_the_python_stdlib() {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        ])
        .output()
        .expect("python3 runs");
    let stdlib = String::from_utf8(out.stdout).unwrap();
    // The top-level modules only: parsing the whole library (tests included) takes too long.
    let files = files_under(std::path::Path::new(stdlib.trim()), &[".py"], false);
    assert!(files.len() > 100, "only {} files", files.len());
    let mut chunks_seen = 0;
    for file in files {
        // A few test files are deliberately not UTF-8.
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let path = file.to_string_lossy();
        let chunks = chunk_file(&path, &text);
        assert_covers(&path, &text, &chunks);
        chunks_seen += chunks.len();
    }
    assert!(chunks_seen > 5_000, "{chunks_seen}");
}

/// One small file per language, mutated below.
const SAMPLES: &[(&str, &str)] = &[
    (
        "a.rs",
        "/// Doc.\nfn main() {\n    let x = vec![1, 2];\n}\nimpl A { fn b(&self) {} }\n",
    ),
    (
        "a.py",
        "import os\n\n@dec\ndef f(x):\n    \"\"\"Doc.\"\"\"\n    return [i for i in x]\n\nclass C:\n    def m(self): pass\n",
    ),
    (
        "a.c",
        "/** doc */\nstatic int f(int *p)\n{\n\treturn *p;\n}\nstruct s { int a; };\n#define X(a) ((a) + 1)\n",
    ),
    (
        "a.cpp",
        "namespace n {\ntemplate <class T> class C { void m(); };\nvoid C<int>::m() {}\n}\n",
    ),
    (
        "a.go",
        "package a\n\n// F does.\nfunc F(x int) int {\n\treturn x\n}\n\ntype T struct{ A int }\n",
    ),
    (
        "a.js",
        "export default class A {\n  m() { return `x${1}`; }\n}\nconst f = () => 1;\n",
    ),
    (
        "a.ts",
        "interface I { a: number }\nexport function f<T>(x: T): T { return x; }\n",
    ),
    (
        "a.java",
        "class A {\n  @Override\n  public int hashCode() { return 1; }\n}\n",
    ),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_byte_is_in_exactly_one_chunk_of_mutated_sources(
        sample in 0..SAMPLES.len(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0..6usize, "[ \n{}()\\[\\];:#/*\"'a-z]{0,4}"), 0..6),
        repeat in 1..40usize,
    ) {
        let (path, text) = SAMPLES[sample];
        let mut text = text.repeat(repeat);
        for (at, cut, insert) in edits {
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            let end = (i + cut).min(text.len());
            let end = (end..=text.len()).find(|&e| text.is_char_boundary(e)).unwrap();
            text.replace_range(i..end, &insert);
        }
        assert_covers(path, &text, &chunk_file(path, &text));
    }
}
