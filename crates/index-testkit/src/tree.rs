//! Generated git worktrees holding every awkward case the literal search must agree with ripgrep
//! on, and the small deterministic generator behind them.

use std::path::Path;
use std::process::{Command, Stdio};

/// A tiny deterministic generator, so failures reproduce from the seed.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (any value, zero included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next value (xorshift64). Not an `Iterator`: the sequence never ends, and callers want
    /// a plain `u64`.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A value in `0..n`; `n` must not be zero.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// One of `items`, which must not be empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The vocabulary of generated files: keywords, case-folding traps (`ß`, final sigma, the Kelvin
/// sign), non-ASCII words and punctuation.
pub const WORDS: &[&str] = &[
    "fn",
    "main",
    "struct",
    "Index",
    "index",
    "INDEX",
    "search",
    "Search",
    "let",
    "mut",
    "return",
    "café",
    "CAFÉ",
    "naïve",
    "Straße",
    "STRASSE",
    "日本語",
    "ΣΊΣΥΦΟΣ",
    "σίσυφος",
    "Kelvin",
    "\u{212A}elvin",
    "foo_bar",
    "fooBar",
    "x",
    "y",
    "0x1F",
    "TODO",
    "todo",
    "{",
    "}",
    "(",
    ")",
    ";",
    "->",
    "::",
];

fn git(root: &Path, args: &[&str]) {
    let st = Command::new("git")
        .current_dir(root)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .expect("git");
    assert!(st.success(), "git {args:?}");
}

/// Writes `bytes` to `root/rel`, creating the parent directories.
pub fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

fn text(rng: &mut Rng, lines: usize, crlf: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..lines {
        let n = 1 + rng.below(12);
        let words: Vec<&str> = (0..n).map(|_| *rng.pick(WORDS)).collect();
        out.extend_from_slice(words.join(" ").as_bytes());
        out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
    }
    out
}

/// Builds a git worktree with every awkward case the literal search must agree with rg on.
/// Returns the tree and an `outside` directory that symlinks point into.
pub fn generated_tree(seed: u64) -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut rng = Rng::new(seed);
    git(root, &["init", "-q"]);
    write(
        outside.path(),
        "secret.txt",
        b"fn main secret outside the root\n",
    );

    let dirs = [
        "src",
        "src/inner",
        "lib",
        "docs",
        "build",
        "sub",
        "sub/deep",
        "name with space",
        "ünï",
        ".hidden",
        "vendor",
    ];
    for i in 0..60 {
        let d = rng.pick(&dirs);
        let ext = rng.pick(&["rs", "txt", "log", "tmp", "md"]);
        let crlf = rng.below(5) == 0;
        let lines = 1 + rng.below(40);
        write(
            root,
            &format!("{d}/file {i}.{ext}"),
            &text(&mut rng, lines, crlf),
        );
    }
    // Nested ignore files with negations, info/exclude, .ignore and .rgignore.
    write(
        root,
        ".gitignore",
        b"*.log\n!keep.log\nbuild/\n/docs/*.tmp\n",
    );
    write(root, "sub/.gitignore", b"*.md\n!README.md\ndeep/\n!deep/\n");
    write(root, "keep.log", b"fn main kept despite *.log\n");
    write(root, "sub/README.md", b"fn main negated back in\n");
    // Hidden names: ignored by a `.*` rule and whitelisted back (a file, and a directory whose
    // files are then searched), and one that only `--hidden` or a type selects.
    write(
        root,
        "lib/.gitignore",
        b".*\n!.gitignore\n!.keep.rs\n!.conf/\n",
    );
    write(root, "lib/.keep.rs", b"fn main whitelisted hidden file\n");
    write(root, "lib/.dropped.rs", b"fn main ignored hidden file\n");
    write(
        root,
        "lib/.conf/in.txt",
        b"fn main in a whitelisted hidden directory\n",
    );
    write(root, "lib/.conf/.deeper.rs", b"fn main ignored in it\n");
    write(root, "src/.plain.rs", b"fn main hidden, not ignored\n");
    write(root, ".git/info/exclude", b"excluded.txt\n");
    write(root, "excluded.txt", b"fn main excluded\n");
    write(root, ".ignore", b"vendor/\n");
    write(root, ".rgignore", b"*.generated\n");
    write(root, "x.generated", b"fn main generated\n");
    // Binary files: a NUL at the start, and one far past the first buffer with a match before it.
    write(root, "bin/early.bin", b"\x00fn main\n");
    // The NUL lies 1.6 MB in, past any buffer this tree can make a searcher grow to (the longest
    // line is 400 kB), so which matches precede the binary stop does not depend on what a
    // searcher read before: ripgrep is a stable oracle for this file.
    let mut late = text(&mut rng, 2000, false);
    late.extend_from_slice(b"fn main before nul\n");
    for _ in 0..16_000 {
        late.extend_from_slice(&[b'z'; 99]);
        late.push(b'\n');
    }
    late.extend_from_slice(b"\x00fn main after nul\n");
    write(root, "bin/late.dat", &late);
    // Non-UTF-8 bytes, CRLF, very long lines, a UTF-16 file with a BOM.
    write(
        root,
        "latin1.txt",
        b"caf\xe9 fn main \xff\xfe invalid\nfn main again\n",
    );
    write(root, "crlf.txt", b"fn main\r\nsecond line main\r\n");
    let mut long = vec![b'a'; 200_000];
    long.extend_from_slice("fn main café".as_bytes());
    long.extend(vec![b'b'; 200_000]);
    long.push(b'\n');
    write(root, "long/line.txt", &long);
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain(
            "fn main utf16\n"
                .encode_utf16()
                .flat_map(|u| u.to_le_bytes()),
        )
        .collect();
    write(root, "utf16.txt", &utf16);
    write(root, "日本語/名前.rs", "fn main() { 日本語 }\n".as_bytes());
    // Symlinks pointing inside and outside the root, to files and to directories.
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        symlink(root.join("crlf.txt"), root.join("link_in.txt")).unwrap();
        symlink(outside.path().join("secret.txt"), root.join("link_out.txt")).unwrap();
        symlink(outside.path(), root.join("link_out_dir")).unwrap();
        symlink(root.join("src"), root.join("link_in_dir")).unwrap();
    }
    (dir, outside)
}

/// Writes `one-line.txt`: a single line of 1 GiB of `a`, then `needle` and a newline.
pub fn write_gib_line(dir: &Path) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("one-line.txt")).unwrap());
    let block = vec![b'a'; 1 << 20];
    for _ in 0..1024 {
        f.write_all(&block).unwrap();
    }
    f.write_all(b"needle\n").unwrap();
    f.flush().unwrap();
}
