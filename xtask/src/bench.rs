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
    if args.iter().any(|a| a == "--node") {
        return node_overhead();
    }
    let linux = args
        .windows(2)
        .any(|w| w[0] == "--corpus" && w[1] == "linux");
    // `--corpus linux-x10`: the monorepo of `cargo xtask corpus linux --copies 10`.
    let linux_copies = args
        .windows(2)
        .filter(|w| w[0] == "--corpus")
        .find_map(|w| w[1].strip_prefix("linux-x")?.parse::<u32>().ok());
    if linux
        && args
            .windows(2)
            .any(|w| w[0] == "--backend" && w[1] == "postgres")
    {
        return postgres_vs_embedded();
    }
    run(cargo().args([
        "build",
        "--release",
        "-p",
        "repo-search-benches",
        "-p",
        "repo-search-cli",
        "--bins",
    ]))?;
    let bin = root().join("target/release");
    let mut scale = Command::new(bin.join("scale-report"));
    if let Some(j) = &json {
        scale.arg("--json").arg(j);
    }
    let scale_ok = run(&mut scale);
    // The peer comparisons need ripgrep only, not the test peers' model or database.
    if literal {
        ci::ripgrep()?;
        literal_vs_rg(&bin)?;
    }
    let tokio = args
        .windows(2)
        .any(|w| w[0] == "--corpus" && w[1] == "tokio");
    if (linux || tokio) && args.iter().any(|a| a == "--semantic") {
        ci::tools()?;
        let (dir, name) = if linux {
            (corpus::linux()?, "Linux 6.12")
        } else {
            (corpus::tokio()?, "tokio (cargo's registry)")
        };
        semantic_vs_trigram(&bin, &dir, name)?;
    } else if linux {
        ci::ripgrep()?;
        index_vs_codesearch(&bin, &corpus::linux()?, "Linux 6.12")?;
    } else if let Some(copies) = linux_copies {
        ci::ripgrep()?;
        let dir = root()
            .join("target/corpus")
            .join(corpus::copies_name(copies));
        if !dir.join(corpus::READY).exists() {
            return Err(format!(
                "{} is not prepared: run `cargo xtask corpus linux --copies {copies}` first \
                 (it needs about {} GB of free disk)",
                dir.display(),
                u64::from(copies) * corpus::BYTES_PER_COPY / 1_000_000_000
            ));
        }
        index_vs_codesearch(&bin, &dir, &format!("Linux 6.12 x{copies}"))?;
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
    if linux.join(corpus::READY).exists() {
        corpora.push((
            "linux 6.12",
            linux,
            ["SYSCALL_DEFINE3(fchmodat", "EXPORT_SYMBOL_GPL("],
        ));
    } else {
        eprintln!("(the Linux corpus is not prepared: `cargo xtask corpus linux` adds it)");
    }
    let cores = cores();
    let mut table = Table::new(
        format!(
            "literal search vs rg -F, {cores} cores, wall time per process, median of 11 (alternating)"
        ),
        2,
        &["corpus", "query", "lines", "ours ms", "rg ms", "ratio"],
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
            table.row([
                name.into(),
                q.into(),
                lines,
                fixed(o, 1),
                fixed(r, 1),
                ratio(o, r),
            ]);
        }
    }
    table.print();
    println!("(lines: ours/rg; ours stops at the 10 000 hard cap, rg prints every line)");
    Ok(())
}

/// Writes back dirty pages and empties the kernel's page cache (root only); whether it did.
fn drop_page_cache() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// The embedded index against codesearch (cindex, csearch) and rg on a Linux corpus (`dir`,
/// named `name` in the table): Linux itself or its copies. The indexes live beside it.
fn index_vs_codesearch(bin: &Path, dir: &Path, name: &str) -> Result<(), String> {
    let dir = dir.to_path_buf();
    let beside = |ext: &str| dir.with_extension(ext);
    for tool in ["cindex", "csearch"] {
        if Command::new(tool)
            .arg("-help")
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .is_err()
        {
            return Err(format!(
                "`{tool}` is missing: apt-get install -y codesearch"
            ));
        }
    }
    let rg = root().join("target/tools/bin/rg");
    let cs_index = beside("csearchindex");
    let store = beside("repo-search-index");
    // cindex's whole build from nothing, in ms.
    let cindex = || -> Result<f64, String> {
        let _ = std::fs::remove_file(&cs_index);
        let started = Instant::now();
        run(Command::new("cindex")
            .arg(&dir)
            .env("CSEARCHINDEX", &cs_index)
            .stderr(Stdio::null()))?;
        Ok(started.elapsed().as_secs_f64() * 1000.0)
    };
    // Both builds first from a page cache emptied before each, where this user may empty it: the
    // build a tree gets when it was not read lately, which a monorepo larger than the cache
    // always gets.
    let cold = if drop_page_cache() {
        let cindex_ms = cindex()?;
        drop_page_cache();
        let ours = probe_output(
            Command::new(bin.join("index-bench"))
                .arg(&dir)
                .arg(&store)
                .arg("--build-only"),
            "index-bench --build-only",
        )?;
        Some((json_number(&ours, "build_ms"), cindex_ms))
    } else {
        None
    };
    let cindex_ms = cindex()?;
    let cindex_bytes = std::fs::metadata(&cs_index)
        .map_err(|e| e.to_string())?
        .len();
    let ours = probe_output(
        Command::new(bin.join("index-bench"))
            .arg(&dir)
            .arg(&store)
            .arg("--rg")
            .arg(&rg),
        "index-bench",
    )?;
    let field = |name: &str| json_number(&ours, name);
    // The CLI as a process, always fresh (directory cache, stat, query; no server), and the
    // peers, in turn within each round (alternating the order) so that the machine's load falls
    // on all of them alike: one warm-up round, then 11.
    let cli = bin.join("repo-search");
    let cli_dir = beside("cli-index");
    let _ = std::fs::remove_dir_all(&cli_dir);
    // A server started now would run beside the peers' timings; the one the CLI starts by
    // itself is measured below.
    let first = time(
        Command::new(&cli)
            .arg("search")
            .arg("first use")
            .arg("--start-server=never")
            .arg("--root")
            .arg(&dir)
            .arg("--index-dir")
            .arg(&cli_dir)
            .stdout(Stdio::null()),
    )?
    .0;
    let mut peers = Vec::new();
    let mut cli_times = Vec::new();
    for (q, re) in [
        ("SYSCALL_DEFINE3(fchmodat", "SYSCALL_DEFINE3\\(fchmodat"),
        ("EXPORT_SYMBOL_GPL(", "EXPORT_SYMBOL_GPL\\("),
    ] {
        let mut cs = Command::new("csearch");
        cs.arg("-l")
            .arg(re)
            .env("CSEARCHINDEX", &cs_index)
            .stdin(Stdio::null());
        let mut r = Command::new(&rg);
        r.args(["--no-config", "-F", "-l", "--", q])
            .current_dir(&dir)
            .stdin(Stdio::null());
        let mut ours = Command::new(&cli);
        ours.arg("search")
            .arg(q)
            .arg("--no-server")
            .arg("--root")
            .arg(&dir)
            .arg("--index-dir")
            .arg(&cli_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut t: [Vec<f64>; 3] = Default::default();
        for round in 0..12 {
            let mut order = [0usize, 1, 2];
            if round % 2 == 1 {
                order.reverse();
            }
            for k in order {
                let cmd = match k {
                    0 => &mut cs,
                    1 => &mut r,
                    _ => &mut ours,
                };
                let ms = time(cmd)?.0;
                if round > 0 {
                    t[k].push(ms);
                }
            }
        }
        let [cs, r, ours] = t;
        peers.push((q, median(cs), median(r)));
        cli_times.push(median(ours));
    }
    // The third peer row is a selective regex (index-bench's first), given to both as a regex.
    let re = "fn\\s+new_[a-z]+\\(";
    let (mut cs, mut r) = (Vec::new(), Vec::new());
    for round in 0..8 {
        let c = time(
            Command::new("csearch")
                .arg("-l")
                .arg(re)
                .env("CSEARCHINDEX", &cs_index)
                .stdin(Stdio::null()),
        )?
        .0;
        let g = time(
            Command::new(&rg)
                .args(["--no-config", "--case-sensitive", "-l", "--regexp", re])
                .current_dir(&dir)
                .stdin(Stdio::null()),
        )?
        .0;
        if round > 0 {
            cs.push(c);
            r.push(g);
        }
    }
    peers.push(("", median(cs), median(r)));
    // `search` as a person types it: the first call on this large index answers by itself (the
    // one-shot rows above) and starts a `repo-search serve`, which answers the calls after it.
    let socket = cli_dir.join("serve.sock");
    let log = cli_dir.join("serve.log");
    let _ = std::fs::remove_file(&log);
    let typed = || {
        let mut search = Command::new(&cli);
        search
            .arg("search")
            .arg("SYSCALL_DEFINE3(fchmodat")
            .arg("--root")
            .arg(&dir)
            .arg("--index-dir")
            .arg(&cli_dir)
            .env_remove("REPO_SEARCH_START_SERVER")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        search
    };
    let starting_ms = time(&mut typed())?.0;
    let waited = Instant::now();
    let server_pid = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let pid = text
            .lines()
            .find_map(|l| l.strip_prefix("repo-search: serving "))
            .and_then(|l| l.rsplit_once("(pid "))
            .and_then(|(_, pid)| pid.strip_suffix(')')?.parse::<u32>().ok());
        // The server logs its pid once it listens.
        if let Some(pid) = pid {
            break pid;
        }
        if waited.elapsed().as_secs() >= 120 {
            return Err(format!(
                "the first search started no server within 2 minutes: {text}"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut served = Vec::new();
    for _ in 0..11 {
        served.push(time(&mut typed())?.0);
    }
    let _ = Command::new("kill")
        .args(["-TERM", &server_pid.to_string()])
        .status();
    let waited = Instant::now();
    while socket.exists() && waited.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    if !log_text.contains("after answering 11 searches") {
        return Err(format!(
            "the started server did not answer the 11 searches timed through it: {log_text}"
        ));
    }
    let served_ms = median(served);
    let floor = probe_output(Command::new(bin.join("stat-floor")).arg(&dir), "stat-floor")?;
    // The MCP server as an agent sees it, on the CLI's index.
    let mcp = probe_output(
        Command::new(bin.join("mcp-probe"))
            .arg(&cli)
            .arg(&dir)
            .arg(&cli_dir)
            .arg("SYSCALL_DEFINE3(fchmodat")
            .arg(&rg),
        "mcp-probe",
    )?;
    let mcp_field = |name: &str| json_number(&mcp, name);
    // The write-then-query target holds on a machine whose cores are all busy: the probe again,
    // with a spinning thread per core beside it.
    let busy = with_cores_busy(|| {
        probe_output(
            Command::new(bin.join("mcp-probe"))
                .arg(&cli)
                .arg(&dir)
                .arg(&cli_dir)
                .arg("SYSCALL_DEFINE3(fchmodat"),
            "mcp-probe, cores busy",
        )
    })?;
    let busy_field = |name: &str| json_number(&busy, name);
    let cores = cores();
    let mut table = Table::new(
        format!("embedded index vs codesearch and rg, {name}, {cores} cores, one run"),
        1,
        &["figure", "ours", "peer", "ratio"],
    );
    table.row(compared(
        "whole build, ms (peer: cindex)",
        field("build_ms"),
        cindex_ms,
    ));
    match cold {
        Some((ours, cindex)) => table.row(compared(
            "whole build from an empty page cache, ms (peer: cindex)",
            ours,
            cindex,
        )),
        None => table.row([
            "whole build from an empty page cache".into(),
            "not measured: /proc/sys/vm/drop_caches needs root".into(),
        ]),
    }
    table.row(compared(
        "index size, MB (peer: cindex)",
        field("index_bytes") / 1e6,
        cindex_bytes as f64 / 1e6,
    ));
    table.row([
        "index size / corpus".into(),
        format!(
            "{:.2}%",
            100.0 * field("index_bytes") / field("corpus_bytes")
        ),
    ]);
    for (q, cs, r) in &peers {
        // The regex row has no fixed string: rg runs it as a regex, without `-F`.
        let (q, rg_flags) = if q.is_empty() {
            ("fn\\s+new_[a-z]+\\(", "-l")
        } else {
            (*q, "-F -l")
        };
        let peer_alone = |name: String, ms: f64| [name, String::new(), fixed(ms, 1)];
        table.row(peer_alone(format!("csearch -l {q}, process ms"), *cs));
        table.row(peer_alone(format!("rg {rg_flags} {q}, process ms"), *r));
    }
    table.row(compared(
        "rare query p50, ms, in-process (peer: csearch)",
        field("rare_p50_ms"),
        peers[0].1,
    ));
    // A type is answered from the index; an include glob still walks the worktree for the
    // ignored files it can select (docs/embedded-index.md, "Hidden and ignored files").
    table.row(compared(
        "rare query -t c, p50 ms, in-process (peer: the same without -t)",
        field("typed_rare_p50_ms"),
        field("untyped_rare_p50_ms"),
    ));
    table.row(compared(
        "rare query -g '*.c', p50 ms, in-process (peer: the same without -g)",
        field("globbed_rare_p50_ms"),
        field("untyped_rare_p50_ms"),
    ));
    table.row(compared(
        "common query p95, ms, cap 1000 (peer: csearch)",
        field("common_p95_ms"),
        peers[1].1,
    ));
    table.row(compared(
        "selective regex p50, ms, in-process (peer: csearch)",
        field("regex_p50_ms"),
        peers[2].1,
    ));
    table.row(compared(
        "selective regex p95, ms, in-process (peer: csearch)",
        field("regex_p95_ms"),
        peers[2].1,
    ));
    table.row(compared(
        "selective regex p95, ms, in-process (peer: rg -l)",
        field("regex_p95_ms"),
        peers[2].2,
    ));
    table.row(compared(
        "repo-search search, process, rare (peer: rg -l)",
        cli_times[0],
        peers[0].2,
    ));
    table.row(compared(
        "repo-search search, process, common (peer: rg -l)",
        cli_times[1],
        peers[1].2,
    ));
    table.row(compared(
        "repo-search search, process, rare (peer: csearch)",
        cli_times[0],
        peers[0].1,
    ));
    // What any process that proves every file unchanged pays before it can answer.
    for (name, key) in [
        (
            "kernel floor: list every directory, ms (peer: rg -l)",
            "list_ms",
        ),
        (
            "kernel floor: list and stat every file, ms (peer: rg -l)",
            "list_stat_ms",
        ),
    ] {
        table.row(compared(name, json_number(&floor, key), peers[0].2));
    }
    table.row([
        "repo-search search, first call: answers and starts a server, ms".into(),
        fixed(starting_ms, 1),
    ]);
    table.row(compared(
        "repo-search search, later calls, through that server, rare (peer: rg -l)",
        served_ms,
        peers[0].2,
    ));
    table.row(compared(
        "repo-search search, later calls, through that server, rare (peer: csearch)",
        served_ms,
        peers[0].1,
    ));
    for (name, key) in [
        (
            "MCP indexed_literal, nothing changed, p50 ms",
            "unchanged_p50_ms",
        ),
        (
            "MCP indexed_literal, nothing changed, p95 ms",
            "unchanged_p95_ms",
        ),
        (
            "MCP indexed_literal after a write, p50 ms",
            "after_write_p50_ms",
        ),
        (
            "MCP indexed_literal after 99 mixed writes, p50 ms",
            "mixed_p50_ms",
        ),
        (
            "MCP indexed_literal after 99 mixed writes, p95 ms",
            "mixed_p95_ms",
        ),
    ] {
        table.row([name.into(), fixed(mcp_field(key), 1)]);
    }
    table.row([
        "MCP writes missed (must be 0)".into(),
        fixed(
            mcp_field("after_write_misses") + mcp_field("mixed_misses"),
            0,
        ),
    ]);
    for (name, key) in [
        (
            "MCP indexed_literal after 99 mixed writes, every core busy, p50 ms",
            "mixed_p50_ms",
        ),
        (
            "MCP indexed_literal after 99 mixed writes, every core busy, p95 ms",
            "mixed_p95_ms",
        ),
    ] {
        table.row([name.into(), fixed(busy_field(key), 1)]);
    }
    table.row([
        "MCP writes missed, every core busy (must be 0)".into(),
        fixed(
            busy_field("after_write_misses") + busy_field("mixed_misses"),
            0,
        ),
    ]);
    // The peers of the MCP call ran in turn with it, in the probe.
    table.row(compared(
        "MCP literal call, p50 ms (peer: rg -l)",
        mcp_field("literal_p50_ms"),
        mcp_field("rg_l_p50_ms"),
    ));
    table.row(compared(
        "MCP literal call, p50 ms (peer: rg -n)",
        mcp_field("literal_p50_ms"),
        mcp_field("rg_n_p50_ms"),
    ));
    table.row([
        "repo-search first use (full build), ms".into(),
        fixed(first, 1),
    ]);
    for (name, key) in [
        (
            "apply 1000 changed files, median of 5 rounds, ms",
            "apply_1000_ms",
        ),
        ("reopen, ms", "reopen_ms"),
        ("build peak heap, MiB", "build_peak_heap_mib"),
        ("query peak heap, MiB", "query_peak_heap_mib"),
    ] {
        table.row([name.into(), fixed(field(key), 1)]);
    }
    table.print();
    println!("raw: {}", ours.trim());
    println!("raw mcp: {}", mcp.trim());
    Ok(())
}

/// The semantic store of the corpus in `dir` beside the trigram index, both built by the CLI from
/// scratch in the same run (`repo-search index`, without and with `--model-dir`), then queried
/// through MCP servers (`semantic-probe`). The semantic build's time leaves out the pass that
/// keeps MiniLM's vectors of every chunk (a repository of at most 20 000 chunks), which is
/// reported apart.
fn semantic_vs_trigram(bin: &Path, dir: &Path, name: &str) -> Result<(), String> {
    let cli = bin.join("repo-search");
    let model = crate::model::model_dir();
    let corpus_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let trigram_dir = root().join(format!("target/corpus/{corpus_name}.trigram-index"));
    let both_dir = root().join(format!("target/corpus/{corpus_name}.semantic-index"));
    // (whole command ms, the MiniLM pass's seconds when it ran).
    let build = |index_dir: &Path, with_model: bool| -> Result<(f64, Option<f64>), String> {
        let _ = std::fs::remove_dir_all(index_dir);
        let mut cmd = Command::new(&cli);
        cmd.arg("index")
            .arg("--root")
            .arg(dir)
            .arg("--index-dir")
            .arg(index_dir)
            .stdout(Stdio::null());
        if with_model {
            cmd.arg("--model-dir").arg(&model);
        }
        let started = Instant::now();
        let out = cmd.output().map_err(|e| e.to_string())?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprint!("{stderr}");
        if !out.status.success() {
            return Err(format!("{cmd:?} failed with {}", out.status));
        }
        // "kept MiniLM vectors of N of M chunks (K computed in S s)"
        let pass = stderr
            .split(" computed in ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|s| s.parse::<f64>().ok());
        Ok((ms, pass))
    };
    let (trigram_ms, _) = build(&trigram_dir, false)?;
    let (whole_ms, kept_s) = build(&both_dir, true)?;
    let both_ms = whole_ms - kept_s.unwrap_or(0.0) * 1000.0;
    let du = |p: &Path| -> u64 {
        std::fs::read_dir(p).map_or(0, |entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok().filter(|m| m.is_file()))
                .map(|m| m.len())
                .sum()
        })
    };
    let semantic_bytes = du(&both_dir.join("semantic"));
    // Before the probe, which starts the kept file over to time a cold re-rank.
    let kept_bytes =
        std::fs::metadata(both_dir.join("semantic-rerank.vectors")).map_or(0, |m| m.len());
    let trigram_bytes = du(&trigram_dir);
    let corpus_bytes: u64 = String::from_utf8_lossy(
        &Command::new("du")
            .args(["-sb", "--exclude=.git"])
            .arg(dir)
            .output()
            .map_err(|e| e.to_string())?
            .stdout,
    )
    .split_whitespace()
    .next()
    .and_then(|n| n.parse().ok())
    .unwrap_or(0);
    let _ = std::fs::remove_dir_all(&trigram_dir);
    let probe = probe_output(
        Command::new(bin.join("semantic-probe"))
            .arg(&cli)
            .arg(dir)
            .arg(&both_dir)
            .arg(&model),
        "semantic-probe",
    )?;
    let field = |name: &str| json_number(&probe, name);
    let cores = cores();
    let mut table = Table::new(
        format!("semantic store vs trigram index, {name}, {cores} cores, one run"),
        1,
        &["figure", "semantic", "trigram", "ratio"],
    );
    table.row(compared(
        "full index, s (semantic: both indexes, one command)",
        both_ms / 1000.0,
        trigram_ms / 1000.0,
    ));
    table.row([
        "then MiniLM's vector of every chunk, s".into(),
        kept_s.map_or_else(|| "too many chunks: not kept".into(), |s| fixed(s, 1)),
    ]);
    let share = |b: u64| b as f64 / corpus_bytes.max(1) as f64;
    table.row([
        "index size / corpus".into(),
        fixed(share(semantic_bytes), 3),
        fixed(share(trigram_bytes), 3),
        ratio(
            share(semantic_bytes),
            share(trigram_bytes).max(f64::MIN_POSITIVE),
        ),
    ]);
    table.row([
        "kept MiniLM vectors / corpus".into(),
        fixed(share(kept_bytes), 3),
    ]);
    table.row(compared(
        "warm query p50, ms (trigram: common identifiers)",
        field("semantic_p50_ms"),
        field("indexed_p50_ms"),
    ));
    table.row(compared(
        "warm query p95, ms",
        field("semantic_p95_ms"),
        field("indexed_p95_ms"),
    ));
    for (name, key, digits) in [
        (
            "warm query p50, ms, hybrid only (--rerank=never)",
            "hybrid_p50_ms",
            1,
        ),
        (
            "warm query p95, ms, hybrid only (--rerank=never)",
            "hybrid_p95_ms",
            1,
        ),
        (
            "first semantic call of a new server, ms",
            "first_call_ms",
            1,
        ),
        (
            "write a file, then a semantic call, p50 ms",
            "after_write_p50_ms",
            1,
        ),
        (
            "write a file, then a semantic call, max ms",
            "after_write_max_ms",
            1,
        ),
        (
            "semantic calls that missed the write, of 7",
            "after_write_misses",
            0,
        ),
        (
            "--rerank, cold chunk cache, p50 ms",
            "rerank_cold_p50_ms",
            1,
        ),
        (
            "--rerank, cold chunk cache, max ms",
            "rerank_cold_max_ms",
            1,
        ),
        ("--rerank, chunks cached, p50 ms", "rerank_cached_p50_ms", 1),
        (
            "--rerank, kept vectors, next server, p50 ms",
            "rerank_kept_p50_ms",
            1,
        ),
    ] {
        table.row([name.into(), fixed(field(key), digits)]);
    }
    table.print();
    println!("raw: {}", probe.trim());
    Ok(())
}

/// The PostgreSQL backend (`pg_probe`, in a throwaway `pg_virtualenv` cluster) beside the
/// embedded index (`index-bench`) and `rg` on the Linux corpus, against the shared index's targets.
fn postgres_vs_embedded() -> Result<(), String> {
    let dir = corpus::linux()?;
    ci::ripgrep()?;
    let rg = root().join("target/tools/bin/rg");
    run(cargo().args([
        "build",
        "--release",
        "-p",
        "repo-search-benches",
        "--bin",
        "index-bench",
        "-p",
        "pg-index",
        "--example",
        "pg_probe",
    ]))?;
    let bin = root().join("target/release");
    let started = Instant::now();
    // `rg` as a process, on one rare and one common query of the probes: a warm-up, then 5.
    let mut rg_ms = Vec::new();
    for q in ["SYSCALL_DEFINE3(fchmodat", "EXPORT_SYMBOL_GPL("] {
        let mut cmd = Command::new(&rg);
        cmd.args(["--no-config", "-F", "-l", "--", q])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let mut t = Vec::new();
        for round in 0..6 {
            let ms = time(&mut cmd)?.0;
            if round > 0 {
                t.push(ms);
            }
        }
        rg_ms.push(median(t));
    }
    let store = root().join("target/corpus/linux.repo-search-index");
    let embedded = probe_output(
        Command::new(bin.join("index-bench"))
            .arg(&dir)
            .arg(&store)
            .arg("--rg")
            .arg(&rg),
        "index-bench",
    )?;
    // A throwaway cluster (`-t`: in a temporary directory, dropped afterwards), UTF-8, with
    // 512 MB of shared buffers so that the index and the hot rows stay in memory. The WAL
    // keeps its default limit: the disk is shared.
    let pg = probe_output(
        Command::new("pg_virtualenv")
            .env("LANG", "C.UTF-8")
            .env("LC_ALL", "C.UTF-8")
            .args(["-t", "-o", "shared_buffers=512MB"])
            .arg(bin.join("examples/pg_probe"))
            .arg(&dir)
            .arg("--rg")
            .arg(&rg),
        "pg_probe",
    )?;
    let e = |name: &str| json_number(&embedded, name);
    let p = |name: &str| json_number(&pg, name);
    let cores = cores();
    let mut table = Table::new(
        format!(
            "PostgreSQL backend vs embedded index and rg, Linux 6.12, {cores} cores, one run ({:.0} s)",
            started.elapsed().as_secs_f64()
        ),
        1,
        &[
            "figure", "postgres", "embedded", "rg", "/embed", "/rg", "target", "met",
        ],
    );
    let mut row = |name: &str, ours: f64, emb: f64, rg: f64, target: &str, met: Option<bool>| {
        // Ratios to the corpus are below 1: they need more digits than milliseconds.
        let show = |x: f64| fixed(x, if x.abs() < 1.0 { 3 } else { 1 });
        let met = match met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "",
        };
        table.row([
            name.into(),
            show(ours),
            show(emb),
            show(rg),
            ratio(ours, emb),
            ratio(ours, rg),
            target.into(),
            met.into(),
        ]);
    };
    let n = f64::NAN;
    let corpus = p("corpus_bytes");
    row(
        "load the tree, s",
        p("load_ms") / 1000.0,
        e("build_ms") / 1000.0,
        n,
        "<= 90",
        Some(p("load_ms") <= 90_000.0),
    );
    row(
        "GIN index / corpus (embedded: index)",
        p("gin_bytes") / corpus,
        e("index_bytes") / e("corpus_bytes"),
        n,
        "<= 0.25",
        Some(p("gin_bytes") / corpus <= 0.25),
    );
    row(
        "table with TOAST / corpus",
        p("table_bytes") / corpus,
        n,
        n,
        "",
        None,
    );
    row(
        "rare literal p50, ms (rg: -F -l process)",
        p("rare_p50_ms"),
        e("rare_p50_ms"),
        rg_ms[0],
        "<= 30",
        Some(p("rare_p50_ms") <= 30.0),
    );
    row(
        "rare literal p95, ms",
        p("rare_p95_ms"),
        e("rare_p95_ms"),
        rg_ms[0],
        "<= 100",
        Some(p("rare_p95_ms") <= 100.0),
    );
    row(
        "common literal (cap 1000) p95, ms",
        p("common_p95_ms"),
        e("common_p95_ms"),
        rg_ms[1],
        "<= 150",
        Some(p("common_p95_ms") <= 150.0),
    );
    row(
        "selective regex p50, ms",
        p("regex_p50_ms"),
        e("regex_p50_ms"),
        n,
        "",
        None,
    );
    row(
        "selective regex p95, ms",
        p("regex_p95_ms"),
        e("regex_p95_ms"),
        n,
        "",
        None,
    );
    row(
        "apply 1000 changed files, ms",
        p("apply_1000_ms"),
        e("apply_1000_ms"),
        n,
        "<= 1000",
        Some(p("apply_1000_ms") <= 1000.0),
    );
    row(
        "apply 1000 unchanged files, ms",
        p("apply_1000_unchanged_ms"),
        e("apply_1000_ms"),
        n,
        "",
        None,
    );
    row(
        "8 clients, rare literal, queries/s",
        p("clients_qps"),
        n,
        n,
        ">= 50",
        Some(p("clients_qps") >= 50.0 && p("clients_failures") == 0.0),
    );
    row(
        "8 clients, failures",
        p("clients_failures"),
        n,
        n,
        "0",
        Some(p("clients_failures") == 0.0),
    );
    row(
        "queries whose hits differ from rg's",
        p("rg_differing_queries"),
        n,
        n,
        "0",
        Some(p("rg_differing_queries") == 0.0 && p("rg_checked_queries") > 0.0),
    );
    table.print();
    println!("raw postgres: {}", pg.trim());
    println!("raw embedded: {}", embedded.trim());
    Ok(())
}

/// Runs a probe binary that prints one JSON object, and returns that output.
fn probe_output(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The number at `"name":` in a probe's flat JSON output, or NaN when it is missing.
fn json_number(text: &str, name: &str) -> f64 {
    let key = format!("\"{name}\":");
    text.split(&key)
        .nth(1)
        .and_then(|r| r.split([',', '}']).next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

/// The cores this machine offers, as every table's title states them.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `f` while a thread per core spins, as on a machine whose cores are all busy.
fn with_cores_busy<T>(f: impl FnOnce() -> T) -> T {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..cores() {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        // Stops the spinners however `f` ends, a panic included, or the scope would wait forever.
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        f()
    })
}

/// A table of figures, the one way `cargo xtask bench` prints them: a title, a header and rows.
/// The first `labels` columns are labels, left-aligned; the others are figures, right-aligned.
/// Each column is as wide as its widest cell, so that a long label never pushes its row's figures
/// out of line. A row may leave its last cells out.
struct Table {
    title: String,
    labels: usize,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(title: String, labels: usize, header: &[&str]) -> Table {
        Table {
            title,
            labels,
            rows: vec![header.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    fn row<const N: usize>(&mut self, cells: [String; N]) {
        self.rows.push(cells.into());
    }

    /// The table as text: a blank line, the title, then one line per row, each without trailing
    /// blanks.
    fn render(&self) -> String {
        let mut widths = Vec::new();
        for row in &self.rows {
            widths.resize(widths.len().max(row.len()), 0);
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = format!("\n{}\n", self.title);
        for row in &self.rows {
            let mut line = String::new();
            for (i, (cell, &w)) in row.iter().zip(&widths).enumerate() {
                if i > 0 {
                    line.push(' ');
                }
                if i < self.labels {
                    line.push_str(&format!("{cell:<w$}"));
                } else {
                    line.push_str(&format!("{cell:>w$}"));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    fn print(&self) {
        print!("{}", self.render());
    }
}

/// `x` with `digits` decimals; blank when the figure is missing (NaN).
fn fixed(x: f64, digits: usize) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x:.digits$}")
    }
}

/// `ours / peer` with three decimals; blank when either figure is missing.
fn ratio(ours: f64, peer: f64) -> String {
    fixed(ours / peer, 3)
}

/// A row of a figure beside its peer's: the label, both figures and their ratio.
fn compared(name: &str, ours: f64, peer: f64) -> [String; 4] {
    [
        name.into(),
        fixed(ours, 1),
        fixed(peer, 1),
        ratio(ours, peer),
    ]
}

/// `cargo xtask bench --node`: the Node binding's own cost (`bindings/node/bench/overhead.mjs`):
/// a query through the package against the same query timed inside Rust, and a JavaScript
/// backend's 1000 hits through the trust gate.
fn node_overhead() -> Result<(), String> {
    crate::node::build()?;
    run(Command::new("node")
        .arg("bench/overhead.mjs")
        .current_dir(crate::node::package_dir()))
}

#[cfg(test)]
mod tests {
    use super::{Table, fixed, json_number, ratio};

    #[test]
    fn tables_fit_each_column_to_its_widest_cell() {
        let mut table = Table::new(
            "peers, 2 cores".into(),
            2,
            &["corpus", "query", "ours ms", "ratio"],
        );
        table.row([
            "generated".into(),
            "a".into(),
            fixed(5.4, 1),
            ratio(1.0, 3.0),
        ]);
        table.row(["linux 6.12".into(), "EXPORT(".into(), fixed(f64::NAN, 1)]);
        table.row([
            "x".into(),
            "a label wider than its header".into(),
            fixed(1234.5, 1),
            ratio(2.0, f64::NAN),
        ]);
        let expected = "\npeers, 2 cores\n\
            corpus     query                         ours ms ratio\n\
            generated  a                                 5.4 0.333\n\
            linux 6.12 EXPORT(\n\
            x          a label wider than its header  1234.5\n";
        assert_eq!(table.render(), expected);
    }

    #[test]
    fn probe_numbers_are_read_by_name() {
        let out = r#"{"build_ms":5068.0,"rare_p50_ms":1.24,"nested":{"x":1},"last":7}"#;
        assert_eq!(json_number(out, "build_ms"), 5068.0);
        assert_eq!(json_number(out, "rare_p50_ms"), 1.24);
        assert_eq!(json_number(out, "last"), 7.0);
        assert!(json_number(out, "missing").is_nan());
    }
}
