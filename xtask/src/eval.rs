//! `cargo xtask eval semantic`: docstring → function on CPython's standard library, and kernel-doc
//! → function on the Linux tree; `cargo xtask model static --tune` mines its training pairs here
//! too, so that what is held out of training is decided next to what is evaluated.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{root, run};

/// Extracts the evaluation set from the standard library of the `python3` on PATH (tests, IDLE,
/// lib2to3 and turtledemo left out) and writes it as JSON to the path given as its argument.
/// Every function is a document, its docstring removed; functions whose code occurs twice are
/// dropped. A function can be asked for when its docstring's first sentence has at least four
/// words and is unique. The corpus is every askable function plus others drawn with a fixed seed
/// up to 10 000; 1 000 askable functions give the test queries and 1 200 others the dev queries (the
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
# The dev queries grew from 200 to 1 200 by a second draw from the askable functions not picked
# yet, so that the test queries stayed what they were.
unpicked = sorted(set(askable) - set(picked))
picked += random.Random(18).sample(unpicked, min(1000, len(unpicked)))
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

/// Extracts the kernel-doc evaluation from a Linux tree (its first argument) into the JSON file
/// named by its second, in the format of [`EXTRACT`], and writes the kernel's training pairs into
/// the file named by its third. Only `.c` files outside Documentation, tools, scripts, samples
/// and usr are read. A function definition starts at column 0 and has its `{` and its `}` alone on
/// a line (the kernel's style); a kernel-doc comment (`/**`) right before it whose first line is
/// `name() - summary` (or `name - summary`) gives the query: the summary, with its continuation
/// lines up to a blank line or the first `@argument`, of at least four words and unique. The
/// document is the function without its comment. Directories are held apart, never functions:
/// a unit is a directory path cut to its first three components (`drivers/net/ethernet`,
/// `fs/ceph`, `mm`); units are taken in the order of their name's sha256 until they hold at least
/// 1 400 askable functions, and only those units give the corpus (askable functions plus others
/// drawn with a fixed seed, up to 10 000) and the 1 000 test and 200 dev queries. Every other
/// unit's askable functions are training pairs, minus any whose summary or code equals an
/// evaluation function's.
const KERNEL_EXTRACT: &str = r##"
import hashlib, json, os, random, re, sys
root = sys.argv[1]
SKIP_TOP = {"Documentation", "tools", "scripts", "samples", "usr", "LICENSES"}
def words(name):
    out = []
    for part in name.split("_"):
        out += [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", part)]
    return out
HEAD = re.compile(r"^\s*\*\s*(?:(?:static|inline)\s+)*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(\s*\))?\s*-+\s*(.*)$")
DEF = re.compile(r"^[A-Za-z_][^;]*\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
def unit(rel):
    return "/".join(rel.split("/")[:-1][:3]) or "."
def hard_of(name, q):
    name_words = set(words(name))
    def named(w):
        ws = set(words(re.sub(r"\W", "_", w)))
        return bool(ws) and ws <= name_words
    return " ".join(w for w in q.split() if not named(w))
cands = []
for base, dirs, files in os.walk(root):
    if os.path.samefile(base, root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_TOP and not d.startswith("."))
    else:
        dirs.sort()
    for f in sorted(files):
        if not f.endswith(".c"):
            continue
        path = os.path.join(base, f)
        rel = os.path.relpath(path, root)
        try:
            lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
        except OSError:
            continue
        i, n = 0, len(lines)
        pending = None
        while i < n:
            line = lines[i]
            if line.startswith("/**") and not line.startswith("/***"):
                j = i
                while j < n and "*/" not in lines[j]:
                    j += 1
                body, pending = lines[i:j + 1], None
                m = HEAD.match(body[1]) if len(body) > 1 else None
                if m and m.group(2).strip():
                    summary = [m.group(2).strip()]
                    for more in body[2:]:
                        s = more.strip()
                        if s.startswith("*/"):
                            break
                        s = s.lstrip("*").strip()
                        if not s or s.startswith("@") or s.endswith(":"):
                            break
                        summary.append(s)
                    pending = (m.group(1), " ".join(summary))
                i = j + 1
                continue
            m = DEF.match(line) if line and line[0] not in "#}/ \t" else None
            if m:
                j = i
                while j < n and j < i + 12 and lines[j] != "{" and not lines[j].rstrip().endswith(";"):
                    j += 1
                if j < n and lines[j] == "{":
                    k = j + 1
                    while k < n and lines[k] != "}":
                        k += 1
                    if k < n:
                        name, q = m.group(1), ""
                        if pending and pending[0] == name:
                            q = pending[1].rstrip(".").strip()
                            if len(q.split()) < 4:
                                q = ""
                        # Functions of 400 lines or more are tables or generated code.
                        if k - i < 400:
                            code = "\n".join(lines[i:k + 1]) + "\n"
                            cands.append({"path": rel, "name": name, "code": code, "query": q,
                                          "hard": hard_of(name, q), "unit": unit(rel)})
                        pending = None
                        i = k + 1
                        continue
            i += 1
code_count, q_count = {}, {}
for c in cands:
    code_count[c["code"]] = code_count.get(c["code"], 0) + 1
    q_count[c["query"].lower()] = q_count.get(c["query"].lower(), 0) + 1
cands = [c for c in cands if code_count[c["code"]] == 1]
def askable(c):
    return c["query"] and q_count[c["query"].lower()] == 1
per_unit = {}
for c in cands:
    if askable(c):
        per_unit[c["unit"]] = per_unit.get(c["unit"], 0) + 1
eval_units, held = [], 0
for u in sorted(per_unit, key=lambda u: hashlib.sha256(u.encode()).hexdigest()):
    if held >= 1400:
        break
    eval_units.append(u)
    held += per_unit[u]
units = set(eval_units)
pool = [c for c in cands if c["unit"] in units]
asked = [c for c in pool if askable(c)]
others = [c for c in pool if not askable(c)]
rng = random.Random(15)
docs = asked + rng.sample(others, max(0, min(len(others), 10000 - len(asked))))
rng.shuffle(docs)
ask = [i for i, d in enumerate(docs) if askable(d)]
picked = random.Random(16).sample(ask, min(1200, len(ask)))
qs = [{"doc": i, "query": docs[i]["query"], "hard": docs[i]["hard"]} for i in picked]
out = {
    "linux_units": eval_units,
    "candidates": len(cands),
    "docs": [{"path": d["path"], "name": d["name"], "code": d["code"]} for d in docs],
    "test": qs[:1000],
    "dev": qs[1000:],
}
json.dump(out, open(sys.argv[2], "w"))
held_q = {c["query"].lower() for c in pool if c["query"]}
held_code = {c["code"] for c in pool}
pairs = [{"query": c["query"], "path": c["path"], "code": c["code"]} for c in cands
         if c["query"] and c["unit"] not in units
         and c["query"].lower() not in held_q and c["code"] not in held_code]
json.dump(pairs, open(sys.argv[3], "w"))
print(f"linux: {len(cands)} distinct functions in {len(per_unit)} units with kernel-doc; {len(eval_units)} units held out ({held} askable), {len(docs)} drawn, {len(out['test'])} test and {len(out['dev'])} dev queries; {len(pairs)} training pairs from the other units")
"##;

/// Mines docstring → function training pairs from the `python3` on PATH (its first argument is
/// the stdlib evaluation file, its second the kernel's pairs, its third the output): every
/// function with a docstring in site-packages, and in the parts of the standard library the
/// evaluation leaves out (tests, IDLE, lib2to3, turtledemo), in the evaluation's format (query =
/// the docstring's first sentence of at least four words; code = the function without its
/// docstring). A pair whose query or code equals an evaluation function's, or whose code occurs
/// twice, is dropped. The kernel's pairs are appended, and the whole is shuffled with a fixed
/// seed.
const PAIRS: &str = r#"
import ast, json, os, random, re, sys, sysconfig
ev = json.load(open(sys.argv[1]))
held_code = {d["code"] for d in ev["docs"]}
held_q = {q["query"].lower() for q in ev["test"] + ev["dev"]}
paths = sysconfig.get_paths()
stdlib, site = paths["stdlib"], paths["purelib"]
LEFT_OUT = {"test", "tests", "idlelib", "lib2to3", "turtledemo"}
def first_sentence(doc):
    para = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.match(r"(.+?[.!?])(\s|$)", para)
    return (m.group(1) if m else para).strip()
def files():
    for base, dirs, fs in os.walk(site):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(fs):
            yield os.path.join(base, f)
    for d in sorted(LEFT_OUT):
        for base, dirs, fs in os.walk(os.path.join(stdlib, d)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(fs):
                yield os.path.join(base, f)
pairs, seen = [], {}
for path in files():
    if not path.endswith(".py"):
        continue
    try:
        src = open(path, encoding="utf-8").read()
        tree = ast.parse(src)
    except Exception:
        continue
    lines = src.splitlines(keepends=True)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        if not doc or len(node.body) < 2:
            continue
        q = first_sentence(doc)
        if len(q.split()) < 4 or q.lower() in held_q:
            continue
        d = node.body[0]
        start = node.lineno - 1
        code = lines[start:d.lineno - 1] + lines[d.end_lineno:node.end_lineno]
        if not code:
            continue
        indent = len(code[0]) - len(code[0].lstrip())
        code = "".join(l[indent:] if l[:indent].strip() == "" else l for l in code)
        if code in held_code:
            continue
        seen[code] = seen.get(code, 0) + 1
        rel = os.path.relpath(path, site if path.startswith(site + os.sep) else stdlib)
        pairs.append({"query": q, "path": rel, "code": code})
python = [p for p in pairs if seen[p["code"]] == 1]
kernel = json.load(open(sys.argv[2]))
out = python + kernel
random.Random(17).shuffle(out)
json.dump(out, open(sys.argv[3], "w"))
print(f"training pairs: {len(python)} Python (site-packages and the stdlib's left-out parts), {len(kernel)} kernel-doc")
"#;

/// Which evaluation corpora a run covers.
#[derive(Clone, Copy, PartialEq)]
enum Corpus {
    Python,
    Kernel,
    All,
}

/// `cargo xtask eval semantic [--corpus python|kernel|all] [--model-dir DIR] [--static FILE]
/// [--rerank-queries N] [--rerank-depth N] [--rerank-tokens N] [--tune] [--dev]
/// [--minilm-cache FILE]`; every option but the first two is passed on to `semantic-index eval`.
pub(crate) fn eval(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) == Some("semble") {
        return crate::semble::semble(&args[1..]);
    }
    const USAGE: &str = "usage: cargo xtask eval semble [--repo NAME]... [--model-dir DIR] [--rerank never|kept|always] [--per-query FILE]\n   or: cargo xtask eval semantic [--corpus python|kernel|all] [--model-dir DIR] [--static FILE] [--rerank-queries N] [--rerank-depth N] [--rerank-tokens N] [--tune] [--dev] [--minilm-cache FILE]";
    if args.first().map(String::as_str) != Some("semantic") {
        return Err(USAGE.into());
    }
    let mut corpus = Corpus::Python;
    let mut model = crate::model::model_dir();
    let mut rest: Vec<String> = Vec::new();
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--corpus" => {
                corpus = match it.next().map(String::as_str) {
                    Some("python") => Corpus::Python,
                    Some("kernel") => Corpus::Kernel,
                    Some("all") => Corpus::All,
                    _ => return Err(USAGE.into()),
                }
            }
            "--model-dir" => model = it.next().map(PathBuf::from).ok_or(USAGE)?,
            _ => rest.push(a.clone()),
        }
    }
    if !model.join(semantic_static_file()).is_file() {
        crate::model::semantic_index_in(crate::model::Build::Tests, &model, &["static"])?;
    }
    for (which, name) in [(Corpus::Python, "python"), (Corpus::Kernel, "kernel")] {
        if corpus != Corpus::All && corpus != which {
            continue;
        }
        // Extracted only when asked for: the kernel's needs the Linux tree and minutes.
        let data = if which == Corpus::Python {
            python_data()?
        } else {
            kernel_data()?.0
        };
        println!("\n## {name}");
        let data = data.to_string_lossy().into_owned();
        let mut args: Vec<&str> = vec!["eval", "--data", &data];
        args.extend(rest.iter().map(String::as_str));
        crate::model::semantic_index_in(crate::model::Build::Release, &model, &args)?;
    }
    Ok(())
}

/// The stdlib evaluation file, extracted now.
fn python_data() -> Result<PathBuf, String> {
    let data = eval_dir()?.join("stdlib-docstrings.json");
    run_script("extract_stdlib.py", EXTRACT, &[&data])?;
    Ok(data)
}

/// The kernel evaluation file and the kernel's training pairs. Reading the tree takes minutes,
/// so both are reused while the script that wrote them is unchanged.
pub(crate) fn kernel_data() -> Result<(PathBuf, PathBuf), String> {
    let dir = eval_dir()?;
    let (data, pairs) = (dir.join("kernel-doc.json"), dir.join("kernel-pairs.json"));
    let stamp = dir.join("kernel-doc.script");
    let fresh = std::fs::read_to_string(&stamp).is_ok_and(|s| s == KERNEL_EXTRACT);
    if !(fresh && data.is_file() && pairs.is_file()) {
        let linux = crate::corpus::linux()?;
        run_script(
            "extract_kernel.py",
            KERNEL_EXTRACT,
            &[&linux, &data, &pairs],
        )?;
        std::fs::write(&stamp, KERNEL_EXTRACT).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    Ok((data, pairs))
}

/// Mines the training pairs of `cargo xtask model static --tune` (after extracting both
/// evaluations, whose functions they leave out) and returns their file.
pub(crate) fn training_pairs() -> Result<PathBuf, String> {
    let stdlib = python_data()?;
    let (_, kernel) = kernel_data()?;
    let out = eval_dir()?.join("tune-pairs.json");
    run_script("mine_pairs.py", PAIRS, &[&stdlib, &kernel, &out])?;
    Ok(out)
}

fn eval_dir() -> Result<PathBuf, String> {
    let dir = root().join("target/eval");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// Runs a Python script written to `target/eval` (a file, so that the echoed command line stays
/// one line).
fn run_script(name: &str, text: &str, args: &[&Path]) -> Result<(), String> {
    let script = eval_dir()?.join(name);
    std::fs::write(&script, text).map_err(|e| format!("{}: {e}", script.display()))?;
    run(Command::new("python3").arg(&script).args(args))
}

/// The static model's file name (`semantic_index::STATIC_FILE`; xtask does not link the crate).
fn semantic_static_file() -> &'static str {
    "static-256.bin"
}
