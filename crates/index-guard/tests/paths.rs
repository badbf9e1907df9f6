//! The path tables: hostile paths that must be refused, odd but honest names that must pass.

use index_contract::PathRejection::{self, *};
use index_guard::{Scope, check_path};

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
