//! One literal search as a process, so `cargo xtask bench --literal` can time it side by side with
//! `rg -F` as a process. `literal-probe ROOT QUERY [--max N]` prints `HITS COMPLETE`;
//! `literal-probe --generate DIR FILES` writes the generated bench tree.

use index_contract::{SearchMode, SearchRequest, limits::SearchLimits};
use literal_search::{LiteralSearch, LiteralSearchConfig};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--generate") {
        let (Some(dir), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse().ok())) else {
            eprintln!("usage: literal-probe --generate DIR FILES");
            return std::process::ExitCode::from(2);
        };
        return match repo_search_benches::tree::generate(std::path::Path::new(dir), n) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{e}");
                std::process::ExitCode::from(2)
            }
        };
    }
    let (Some(root), Some(query)) = (args.first(), args.get(1)) else {
        eprintln!("usage: literal-probe ROOT QUERY [--max N]");
        return std::process::ExitCode::from(2);
    };
    let max = args
        .iter()
        .position(|a| a == "--max")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let config = LiteralSearchConfig {
        limits: match SearchLimits::new(10_000, 4096, std::time::Duration::from_secs(120)) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("{e}");
                return std::process::ExitCode::from(2);
            }
        },
        ..Default::default()
    };
    let search = match LiteralSearch::with_config(root, config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{root}: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut request = SearchRequest::new(query.clone(), SearchMode::Literal);
    request.max_results = Some(max);
    match search.search_blocking(&request) {
        Ok(r) => {
            println!("{} {}", r.hits.len(), r.complete);
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}: {e}", e.code());
            std::process::ExitCode::from(2)
        }
    }
}
