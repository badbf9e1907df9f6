//! A generated source tree for literal-search benchmarks, with a rare token and a common one.

use std::path::Path;

/// In how many files the rare token appears (once each).
pub const RARE_FILES: usize = 3;
/// The rare token.
pub const RARE: &str = "needle_rare_token";
/// A token on every tenth line.
pub const COMMON: &str = "common_marker";

/// Writes `files` Rust-like files of about 4 KiB under `root`, deterministically.
pub fn generate(root: &Path, files: usize) -> std::io::Result<()> {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..files {
        let dir = root.join(format!("crate_{}/src/mod_{}", i % 37, i % 11));
        std::fs::create_dir_all(&dir)?;
        let mut text = String::with_capacity(4500);
        for line in 0..120 {
            let n = next();
            if line % 10 == 3 {
                text.push_str(&format!("    let {COMMON}_{line} = compute({n:x});\n"));
            } else {
                text.push_str(&format!(
                    "    fn helper_{i}_{line}(x: u64) -> u64 {{ x ^ 0x{:x} }}\n",
                    n % 0xffff
                ));
            }
        }
        if i % (files / RARE_FILES).max(1) == 0 && i / (files / RARE_FILES).max(1) < RARE_FILES {
            text.push_str(&format!("// {RARE} lives here\n"));
        }
        std::fs::write(dir.join(format!("file_{i}.rs")), text)?;
    }
    Ok(())
}
