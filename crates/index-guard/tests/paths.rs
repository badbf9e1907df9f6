//! The path tables: hostile paths that must be refused, odd but honest names that must pass.

use index_contract::PathRejection::{self, *};
use index_guard::{Scope, check_path, is_git_internal_segment};

fn check(path: &str, expected: Result<(), PathRejection>) {
    assert_eq!(check_path(path), expected, "path {path:?}");
}

#[test]
fn hostile_paths_are_rejected() {
    let long = "a/".repeat(2048) + "b";
    let long_segment = "x".repeat(4097);
    let table: &[(&str, PathRejection)] = &[
        // POSIX absolute and parent escapes.
        ("/etc/passwd", Absolute),
        ("/", Absolute),
        ("//etc/passwd", Absolute),
        ("..", ParentSegment),
        ("../x", ParentSegment),
        ("a/..", ParentSegment),
        ("a/../b", ParentSegment),
        ("a/b/../../..", ParentSegment),
        ("a/./../b", DotSegment),
        ("./a", DotSegment),
        (".", DotSegment),
        ("a/.", DotSegment),
        ("a/./b", DotSegment),
        // Empty segments.
        ("", Empty),
        ("a//b", EmptySegment),
        ("a/", EmptySegment),
        ("a/b/", EmptySegment),
        // Windows forms.
        ("C:", DrivePrefix),
        ("C:/Windows", DrivePrefix),
        ("c:\\windows", DrivePrefix),
        ("Z:relative", DrivePrefix),
        ("\\\\server\\share\\x", Backslash),
        ("\\\\?\\C:\\x", Backslash),
        ("\\windows", Backslash),
        ("a\\b", Backslash),
        ("a\\..\\..\\b", Backslash),
        ("..\\x", Backslash),
        ("a/..\\b", Backslash),
        // NUL and controls.
        ("a\0b", Nul),
        ("\0", Nul),
        ("a/\0/b", Nul),
        ("a\nb", ControlCharacter),
        ("a\rb", ControlCharacter),
        ("a\tb", ControlCharacter),
        ("\u{1b}[31mred", ControlCharacter),
        ("a\u{7f}", ControlCharacter),
        ("a\u{85}b", ControlCharacter),
        // Unicode look-alikes of separators and dots, and invisible or bidi characters.
        ("\u{FF0E}\u{FF0E}/etc", Lookalike),
        ("..\u{FF0F}etc", Lookalike),
        ("a\u{2215}b", Lookalike),
        ("a\u{2044}b", Lookalike),
        ("\u{2025}/x", Lookalike),
        ("\u{2024}\u{2024}", Lookalike),
        ("a\u{FF3C}b", Lookalike),
        ("a\u{FE68}b", Lookalike),
        ("\u{202E}txt.exe", Lookalike),
        ("a\u{200B}b", Lookalike),
        ("a\u{2066}b", Lookalike),
        ("\u{FEFF}a", Lookalike),
        ("C\u{FF1A}/x", Lookalike),
        // Git internals.
        (".git/config", GitInternal),
        ("a/.GIT/config", GitInternal),
        // Very long paths.
        (long.as_str(), TooLong),
        (long_segment.as_str(), TooLong),
    ];
    assert!(
        table.len() >= 50,
        "the table must hold at least 50 hostile paths"
    );
    for (path, reason) in table {
        check(path, Err(*reason));
    }
}

#[test]
fn legitimate_odd_names_are_accepted() {
    for path in [
        "..test",
        "a..b",
        "...",
        "....",
        ".hidden",
        "a/.b/c",
        "%2e%2e",
        "%2e%2e/%2fetc",
        "name with spaces.txt",
        "dir with space/file",
        "ünïcödé/日本語.rs",
        "emoji😀.md",
        "notes:2.txt",
        "-rf",
        "~",
        "a/b/c/d/e/f/g/h",
        "x".repeat(255).as_str(),
        "café",
        ".env.",
        ".d./in.txt",
        "说明：安装.md",
        "第1章．概要.md",
        "Loading….md",
    ] {
        check(path, Ok(()));
    }
}

#[test]
fn scope_containment_is_component_wise() {
    let src = Scope::parse(Some("src")).unwrap();
    assert!(src.contains("src"));
    assert!(src.contains("src/a"));
    assert!(src.contains("src/a/b"));
    assert!(!src.contains("srcx/a"));
    assert!(!src.contains("srcx"));
    assert!(!src.contains("sr"));
    assert!(!src.contains("lib/src"));
    let trailing = Scope::parse(Some("src/")).unwrap();
    assert_eq!(trailing, src);
    for root in [None, Some(""), Some("."), Some("./")] {
        assert!(Scope::parse(root).unwrap().contains("anything/at/all"));
    }
}

#[test]
fn escaping_scope_is_refused() {
    for bad in ["..", "../x", "/etc", "a/../..", "a\\b", "src//", "C:/x"] {
        let err = Scope::parse(Some(bad)).unwrap_err();
        assert_eq!(err.code(), index_contract::ErrorCode::Untrusted, "{bad:?}");
    }
}

#[test]
fn structural_lookalikes_are_refused() {
    for (path, reason) in [
        // Confusable with `/` or `\` anywhere in a segment: the segment reads as two.
        ("a\u{2044}b", Lookalike),   // FRACTION SLASH
        ("a\u{2215}b", Lookalike),   // DIVISION SLASH
        ("a\u{29F8}b", Lookalike),   // BIG SOLIDUS
        ("a\u{2216}b", Lookalike),   // SET MINUS
        ("a\u{FF0F}b", Lookalike),   // FULLWIDTH SOLIDUS (NFKC `/`)
        ("a\u{FF3C}b", Lookalike),   // FULLWIDTH REVERSE SOLIDUS (NFKC `\`)
        ("a\u{FE68}b", Lookalike),   // SMALL REVERSE SOLIDUS
        ("a\u{29F5}b", Lookalike),   // REVERSE SOLIDUS OPERATOR
        ("a\u{2571}b", Lookalike),   // BOX DRAWINGS LIGHT DIAGONAL
        ("x\u{2AFD}y", Lookalike),   // DOUBLE SOLIDUS OPERATOR
        ("\u{2F02}x", Lookalike),    // KANGXI RADICAL DOT (NFKC is an ideograph; the skeleton `\`)
        ("\u{2105}.txt", Lookalike), // CARE OF (NFKC `c/o`)
        ("..\u{2215}etc/passwd", Lookalike),
        // A segment that reads as `.` or `..`.
        ("\u{2024}", Lookalike), // ONE DOT LEADER
        ("a/\u{2024}/b", Lookalike),
        ("\u{2025}", Lookalike), // TWO DOT LEADER (NFKC `..`)
        ("a/\u{2025}/etc", Lookalike),
        ("\u{FE52}", Lookalike), // SMALL FULL STOP
        ("\u{FE52}\u{FE52}/x", Lookalike),
        ("\u{FF0E}", Lookalike), // FULLWIDTH FULL STOP
        ("a/\u{FF0E}\u{FF0E}/b", Lookalike),
        (".\u{FF0E}/x", Lookalike),        // mixed ASCII and fullwidth
        ("\u{FE30}/x", Lookalike),         // PRESENTATION FORM FOR VERTICAL TWO DOT LEADER
        ("\u{0701}\u{0701}/x", Lookalike), // SYRIAC SUPRALINEAR FULL STOP (skeleton only)
        // A one-dot look-alike standing before a separator.
        ("a\u{FF0E}/b", Lookalike),
        ("docs\u{2024}/x", Lookalike),
        // A drive prefix after NFKC.
        ("\u{FF23}:x", Lookalike),         // FULLWIDTH C, colon
        ("c\u{FF1A}x", Lookalike),         // c, FULLWIDTH COLON
        ("\u{FF43}\u{FE55}/x", Lookalike), // FULLWIDTH c, SMALL COLON
        // Invisible and bidirectional characters.
        ("a\u{061C}b", Lookalike),
        ("a\u{200C}b", Lookalike),
        ("a\u{200D}b", Lookalike),
        ("a\u{200E}b", Lookalike),
        ("a\u{200F}b", Lookalike),
        ("a\u{202A}b", Lookalike),
        ("a\u{2060}b", Lookalike),
        ("a\u{2069}b", Lookalike),
    ] {
        check(path, Err(reason));
    }
}

#[test]
fn names_that_only_contain_a_lookalike_are_accepted() {
    for path in [
        "…",
        "\u{FF0E}\u{FF0E}\u{FF0E}",
        "a\u{2025}b",
        "a\u{2024}b.txt",
        "\u{2488}intro.md", // DIGIT ONE FULL STOP (NFKC `1.`)
        "file\u{FF0E}", // a one-dot look-alike ending the last segment is not before a separator
        "ノート.md",    // KATAKANA LETTER NO is confusable with `/` but is a letter
        "丿/丶",        // CJK ideographs confusable with `/` and `\`
        "٠/٢٠٢٤.md",    // ARABIC-INDIC DIGIT ZERO is confusable with `.` but is a digit
        "100%.txt",     // `%` has the prototype `º/₀`
        "資料/説明：安装.md",
        "notes\u{FF1A}2.txt",
        "\u{FF23}.md", // FULLWIDTH C without a colon
    ] {
        check(path, Ok(()));
    }
}

#[test]
fn fullwidth_colon_in_a_name_is_accepted() {
    check("说明：安装.md", Ok(()));
    check("docs/说明：安装.md", Ok(()));
}

#[test]
fn fullwidth_full_stop_inside_a_name_is_accepted() {
    check("第1章．概要.md", Ok(()));
    check("book/第1章．概要.md", Ok(()));
}

#[test]
fn ellipsis_in_a_name_is_accepted() {
    check("Loading….md", Ok(()));
    check("ui/Loading…/index.ts", Ok(()));
}

#[test]
fn honest_dot_names_that_ripgrep_hides_are_accepted() {
    check("...", Ok(()));
    check(".env.", Ok(()));
    check(".d./in.txt", Ok(()));
}

#[test]
fn git_config_at_any_depth_and_case_is_refused() {
    for path in [
        ".git/config",
        "a/.GIT/config",
        ".Git/hooks/x",
        "a/b/c/.gIt/config",
        ".git",
        "sub/.git",
    ] {
        check(path, Err(GitInternal));
    }
}

#[test]
fn git_internal_spellings_are_refused() {
    for path in [
        // HFS+ drops these code points, so each of these is `.git` on a Mac.
        ".g\u{200C}it/config",
        ".gi\u{200D}t/config",
        "\u{200E}.git/config",
        ".git\u{200F}/config",
        ".\u{202E}git/config",
        ".g\u{206A}it/config",
        ".GIT\u{206F}/config",
        ".git\u{FEFF}/config",
        // NTFS trims trailing dots and spaces, has 8.3 short names and alternate data streams.
        ".git./config",
        ".git. . ./config",
        ".git /config",
        "a/.GIT../config",
        "git~1/config",
        "GIT~1/config",
        "Git~1. /config",
        ".git::$INDEX_ALLOCATION/config",
        ".git:stream",
        "git~1:x/config",
    ] {
        check(path, Err(GitInternal));
    }
}

#[test]
fn git_internal_near_misses_are_accepted() {
    for path in [
        ".github/workflows/ci.yml",
        ".gitignore",
        ".gitmodules",
        ".gitattributes",
        ".gitkeep",
        "git/config",
        "a.git/b",
        "x.git",
        "..git/x",
        ".git~1/x",
        "git~2/config",
        "git~1x/config",
        ".gitx/config",
        ".git-rewrite/x",
        ".git_/x",
        "git",
        "my.git.repo/HEAD",
    ] {
        check(path, Ok(()));
    }
}

#[test]
fn is_git_internal_segment_matches_what_git_refuses() {
    for (segment, internal) in [
        (".git", true),
        (".GIT", true),
        (".git.", true),
        (".git  ", true),
        ("git~1", true),
        (".git::$INDEX_ALLOCATION", true),
        (".g\u{200C}it", true),
        ("\u{FEFF}.git", true),
        // `\` is a separator on NTFS, so each side of it is a name.
        ("x\\.git", true),
        (".git\\x", true),
        ("a\\b", false),
        (".github", false),
        (".gitmodules", false),
        (".git-x", false),
        (".gi", false),
        ("", false),
        (".", false),
        ("git", false),
        (".g\u{2060}it", false), // WORD JOINER is not ignored by HFS+
        (".ｇit", false),        // FULLWIDTH g: a different name everywhere
    ] {
        assert_eq!(is_git_internal_segment(segment), internal, "{segment:?}");
    }
}

/// The literal search withholds exactly the look-alike names, whatever else a name holds: a bidi
/// override next to a control character is still one, while a control character, a backslash
/// or a drive prefix alone is not (JSON carries those exactly).
#[test]
fn is_lookalike_path_finds_lookalikes_whatever_else_the_name_holds() {
    let check = |path: &str, expected: bool| {
        assert_eq!(index_guard::is_lookalike_path(path), expected, "{path:?}");
    };
    check("evil\u{202E}txt.exe", true);
    check("a\u{200B}b.rs", true);
    check("x\n\u{202E}y", true);
    check("..\u{FF0F}etc", true);
    check("a\u{2215}b", true);
    check("x\nforged.rs", false);
    check("a\\b.txt", false);
    check("c:x", false);
    check("说明：安装.md", false);
    check("Loading….md", false);
    // The gate reports the first rule a path breaks.
    assert_eq!(check_path("evil\u{202E}txt.exe"), Err(Lookalike));
    assert_eq!(check_path("x\n\u{202E}y"), Err(ControlCharacter));
}
