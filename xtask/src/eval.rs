//! `cargo xtask eval semantic`: docstring → function on CPython's standard library.

use std::process::Command;

use crate::{root, run};

/// Extracts the evaluation set from the standard library of the `python3` on PATH and writes it
/// as JSON to the path given as its argument. Functions with a docstring whose first sentence has
/// at least four words are candidates; functions whose code or whose first sentence occurs twice
/// are dropped (such a query has no single answer). 10 000 functions are drawn with a fixed seed;
/// their docstrings are removed from the code. 1 000 of them give the test queries and 200 others
/// the dev queries (the only ones the weights were chosen on). The hard variant of a query drops
/// every word that is a word of the function's own name.
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
            if not doc or len(node.body) < 2:
                continue
            q = first_sentence(doc)
            if len(q.split()) < 4:
                continue
            d = node.body[0]
            start = node.lineno - 1
            code = lines[start:d.lineno - 1] + lines[d.end_lineno:node.end_lineno]
            indent = len(code[0]) - len(code[0].lstrip())
            code = "".join(l[indent:] if l[:indent].strip() == "" else l for l in code)
            name_words = set(words(node.name))
            hard = " ".join(w for w in q.split() if not (set(words(re.sub(r"\W", "_", w))) & name_words and set(words(re.sub(r"\W", "_", w))) <= name_words))
            cands.append({"path": rel, "name": node.name, "code": code, "query": q, "hard": hard})
code_count, q_count = {}, {}
for c in cands:
    code_count[c["code"]] = code_count.get(c["code"], 0) + 1
    q_count[c["query"].lower()] = q_count.get(c["query"].lower(), 0) + 1
cands = [c for c in cands if code_count[c["code"]] == 1 and q_count[c["query"].lower()] == 1]
rng = random.Random(15)
docs = rng.sample(cands, min(10000, len(cands)))
picked = random.Random(16).sample(range(len(docs)), min(1200, len(docs)))
qs = [{"doc": i, "query": docs[i]["query"], "hard": docs[i]["hard"]} for i in picked]
out = {
    "python": sys.version.split()[0],
    "candidates": len(cands),
    "docs": [{"path": d["path"], "name": d["name"], "code": d["code"]} for d in docs],
    "test": qs[:1000],
    "dev": qs[1000:],
}
json.dump(out, open(sys.argv[1], "w"))
print(f"python {out['python']}: {len(cands)} candidate functions, {len(docs)} drawn, {len(out['test'])} test and {len(out['dev'])} dev queries")
"#;

/// `cargo xtask eval semantic [--rerank-queries N] [--tune]`.
pub(crate) fn eval(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) != Some("semantic") {
        return Err("usage: cargo xtask eval semantic [--rerank-queries N] [--tune]".into());
    }
    let data = root().join("target/eval/stdlib-docstrings.json");
    std::fs::create_dir_all(root().join("target/eval")).map_err(|e| e.to_string())?;
    run(Command::new("python3").arg("-c").arg(EXTRACT).arg(&data))?;
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
