//! Prints the scale check as a table (and `--json FILE`); exits 1 when a bar of the specification
//! is missed. Run it through `cargo xtask bench`.

use repo_search_benches::alloc::CountingAllocator;
use repo_search_benches::scale::{ScaleConfig, run};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1));
    let report = match run(&ScaleConfig::default()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("scale check could not run: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    print!("{}", report.table());
    if let Some(path) = json {
        let body = serde_json::json!({ "report": report, "figures": report.figures() });
        if let Err(e) = std::fs::write(path, serde_json::to_vec_pretty(&body).unwrap_or_default()) {
            eprintln!("could not write {path}: {e}");
            return std::process::ExitCode::from(2);
        }
    }
    if report.spec_ok() {
        std::process::ExitCode::SUCCESS
    } else {
        eprintln!("a bar of the specification was missed");
        std::process::ExitCode::FAILURE
    }
}
