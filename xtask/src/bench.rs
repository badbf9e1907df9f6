//! `cargo xtask bench`: the scale check as a table, and side-by-side peer comparisons.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{cargo, ci, corpus, root, run};

pub(crate) fn bench(args: &[String]) -> Result<(), String> {
    let json = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let literal = args.iter().any(|a| a == "--literal");
    run(cargo().args(["build", "--release", "-p", "repo-search-benches", "--bins"]))?;
    let bin = root().join("target/release");
    let mut scale = Command::new(bin.join("scale-report"));
    if let Some(j) = &json {
        scale.arg("--json").arg(j);
    }
    let scale_ok = run(&mut scale);
    if literal {
        ci::tools()?;
        literal_vs_rg(&bin)?;
    }
    scale_ok
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times one command `runs` times; returns the median in ms and the first run's stdout.
fn time(cmd: &mut Command) -> Result<(f64, String), String> {
    let started = Instant::now();
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() && out.status.code() != Some(1) {
        return Err(format!("{cmd:?} failed with {}", out.status));
    }
    Ok((ms, String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn literal_vs_rg(bin: &Path) -> Result<(), String> {
    let rg = root().join("target/tools/bin/rg");
    let probe = bin.join("literal-probe");
    let generated = root().join("target/corpus/generated-20000");
    if !generated.join(".ready").exists() {
        let _ = std::fs::remove_dir_all(&generated);
        std::fs::create_dir_all(&generated).map_err(|e| e.to_string())?;
        run(Command::new(&probe)
            .arg("--generate")
            .arg(&generated)
            .arg("20000"))?;
        std::fs::write(generated.join(".ready"), b"").map_err(|e| e.to_string())?;
    }
    let mut corpora: Vec<(&str, PathBuf, [&str; 2])> = vec![(
        "generated (20000 files, 90 MB)",
        generated,
        ["needle_rare_token", "common_marker_53"],
    )];
    let linux = corpus::linux_dir();
    if linux.join(".repo-search-corpus-ready").exists() {
        corpora.push((
            "linux 6.12",
            linux,
            ["SYSCALL_DEFINE3(fchmodat", "EXPORT_SYMBOL_GPL("],
        ));
    } else {
        eprintln!("(the Linux corpus is not prepared: `cargo xtask corpus linux` adds it)");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "\nliteral search vs rg -F, {cores} cores, wall time per process, median of 11 (alternating)"
    );
    println!(
        "{:<32} {:<28} {:>8} {:>10} {:>10} {:>7}",
        "corpus", "query", "lines", "ours ms", "rg ms", "ratio"
    );
    for (name, dir, queries) in corpora {
        for q in queries {
            let mut ours = Vec::new();
            let mut theirs = Vec::new();
            let mut lines = String::new();
            for i in 0..12 {
                let mut a = Command::new(&probe);
                a.arg(&dir).arg(q).arg("--max").arg("10000");
                let mut b = Command::new(&rg);
                b.args(["--no-config", "-F", "--line-number", "--", q])
                    .current_dir(&dir)
                    .stdin(Stdio::null());
                let (first, second) = if i % 2 == 0 {
                    (&mut a, &mut b)
                } else {
                    (&mut b, &mut a)
                };
                let (t1, o1) = time(first)?;
                let (t2, o2) = time(second)?;
                let (to, tr, oo, or) = if i % 2 == 0 {
                    (t1, t2, o1, o2)
                } else {
                    (t2, t1, o2, o1)
                };
                if i == 0 {
                    lines = format!(
                        "{}/{}",
                        oo.split_whitespace().next().unwrap_or("?"),
                        or.lines().count()
                    );
                    continue; // warm-up
                }
                ours.push(to);
                theirs.push(tr);
            }
            let (o, r) = (median(ours), median(theirs));
            println!(
                "{name:<32} {q:<28} {lines:>8} {o:>10.1} {r:>10.1} {:>7.3}",
                o / r
            );
        }
    }
    println!("(lines: ours/rg; ours stops at the 10 000 hard cap, rg prints every line)");
    Ok(())
}
