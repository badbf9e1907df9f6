//! `cargo xtask eval semantic`: docstring → function on CPython's standard library.

use std::process::Command;

use crate::{root, run};

/// Extracts the evaluation set from the standard library of the `python3` on PATH (tests, IDLE,
/// lib2to3 and turtledemo left out) and writes it as JSON to the path given as its argument.
/// Every function is a document, its docstring removed; functions whose code occurs twice are
/// dropped. A function can be asked for when its docstring's first sentence has at least four
/// words and is unique. The corpus is every askable function plus others drawn with a fixed seed
/// up to 10 000; 1 000 askable functions give the test queries and 200 others the dev queries (the
/// only ones the weights were chosen on). The hard variant of a query drops every word made only
/// of words of the function's own name.
const EXTRACT: &str = r#"
import ast, json, os, random, re, sys, sysconfig
stdlib = sysconfig.get_paths()["stdlib"]
SKIP = {"test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__", "lib2to3", "turtledemo"}
def words(name):
    out = []
    for part in name.split("_"):
        out += [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", part)]
    return out
def first_sentence(doc):
    para = doc.strip().split("\n\n")[0]
    para = " ".join(para.split())
    m = re.match(r"(.+?[.!?])(\s|$)", para)
    return (m.group(1) if m else para).strip()
cands = []
for base, dirs, files in os.walk(stdlib):
    dirs[:] = sorted(d for d in dirs if d not in SKIP)
    for f in sorted(files):
        if not f.endswith(".py"):
            continue
        path = os.path.join(base, f)
        try:
            src = open(path, encoding="utf-8").read()
            tree = ast.parse(src)
        except Exception:
            continue
        lines = src.splitlines(keepends=True)
        rel = os.path.relpath(path, stdlib)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node)
            start = node.lineno - 1
            if doc:
                if len(node.body) < 2:
                    continue
                d = node.body[0]
                code = lines[start:d.lineno - 1] + lines[d.end_lineno:node.end_lineno]
            else:
                code = lines[start:node.end_lineno]
            indent = len(code[0]) - len(code[0].lstrip())
            code = "".join(l[indent:] if l[:indent].strip() == "" else l for l in code)
            q = first_sentence(doc) if doc else ""
            if len(q.split()) < 4:
                q = ""
            name_words = set(words(node.name))
            def named(w):
                ws = set(words(re.sub(r"\W", "_", w)))
                return bool(ws) and ws <= name_words
            hard = " ".join(w for w in q.split() if not named(w))
            cands.append({"path": rel, "name": node.name, "code": code, "query": q, "hard": hard})
code_count, q_count = {}, {}
for c in cands:
    code_count[c["code"]] = code_count.get(c["code"], 0) + 1
    q_count[c["query"].lower()] = q_count.get(c["query"].lower(), 0) + 1
cands = [c for c in cands if code_count[c["code"]] == 1]
asked = [c for c in cands if c["query"] and q_count[c["query"].lower()] == 1]
others = [c for c in cands if not (c["query"] and q_count[c["query"].lower()] == 1)]
rng = random.Random(15)
docs = asked + rng.sample(others, max(0, min(len(others), 10000 - len(asked))))
rng.shuffle(docs)
askable = [i for i, d in enumerate(docs) if d["query"] and q_count[d["query"].lower()] == 1]
picked = random.Random(16).sample(askable, min(1200, len(askable)))
qs = [{"doc": i, "query": docs[i]["query"], "hard": docs[i]["hard"]} for i in picked]
out = {
    "python": sys.version.split()[0],
    "candidates": len(cands),
    "docs": [{"path": d["path"], "name": d["name"], "code": d["code"]} for d in docs],
    "test": qs[:1000],
    "dev": qs[1000:],
}
json.dump(out, open(sys.argv[1], "w"))
print(f"python {out['python']}: {len(cands)} distinct functions, {len(asked)} with a usable docstring, {len(docs)} drawn, {len(out['test'])} test and {len(out['dev'])} dev queries")
"#;

/// `cargo xtask eval semantic [--rerank-queries N] [--rerank-depth N] [--tune]`.
pub(crate) fn eval(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) != Some("semantic") {
        return Err(
            "usage: cargo xtask eval semantic [--rerank-queries N] [--rerank-depth N] [--tune]"
                .into(),
        );
    }
    let data = root().join("target/eval/stdlib-docstrings.json");
    std::fs::create_dir_all(root().join("target/eval")).map_err(|e| e.to_string())?;
    // Written to a file so that the echoed command line stays one line.
    let script = root().join("target/eval/extract_stdlib.py");
    std::fs::write(&script, EXTRACT).map_err(|e| format!("{}: {e}", script.display()))?;
    run(Command::new("python3").arg(&script).arg(&data))?;
    let model = crate::model::model_dir();
    if !model.join(semantic_static_file()).is_file() {
        crate::model::semantic_index(&["static"])?;
    }
    let data = data.to_string_lossy().into_owned();
    let mut rest: Vec<&str> = vec!["eval", "--data", &data];
    rest.extend(args[1..].iter().map(String::as_str));
    crate::model::semantic_index(&rest)
}

/// The static model's file name (`semantic_index::STATIC_FILE`; xtask does not link the crate).
fn semantic_static_file() -> &'static str {
    "static-256.bin"
}
