//! Names and text made safe to print: the one rule of the human output.
//!
//! A file name may hold any character but `/`: a newline that starts a forged hit line
//! (`x\nforged.rs:1:1:…`), an escape sequence the terminal runs, a right-to-left override that
//! reorders what follows it, a zero-width space. Such a name is printed quoted, as git prints it
//! (`core.quotePath`): in double quotes, with `\t`, `\n`, `\r`, `\"`, `\\` and the other C escapes,
//! and each byte of any other unsafe character in octal (`\033`, `\342\200\256`). Any other name,
//! every non-ASCII letter included, is printed as it is, which is what ripgrep prints; a name
//! that starts with `"` is quoted too, so that a quoted name is never ambiguous.
//!
//! On a terminal, a line's text (a hit's snippet, a context line) gets the same escapes for its
//! unsafe characters, tab aside, without quotes: a matched line cannot move the cursor, recolour
//! the screen or set the window title. Piped, text is printed byte for byte, as ripgrep prints it.

use std::borrow::Cow;

/// Whether printing `c` could change what a person sees elsewhere on the screen, or be unseen:
/// control characters (C0, DEL, C1), line and paragraph separators, and the format characters
/// (Unicode category `Cf`: bidi controls, zero-width characters, invisible operators, tags).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}')
}

/// Appends `c` escaped as git escapes it in a quoted name.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\u{07}' => out.push_str("\\a"),
        '\u{08}' => out.push_str("\\b"),
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\u{0B}' => out.push_str("\\v"),
        '\u{0C}' => out.push_str("\\f"),
        '\r' => out.push_str("\\r"),
        _ => {
            let mut utf8 = [0u8; 4];
            for b in c.encode_utf8(&mut utf8).bytes() {
                out.push_str(&format!("\\{b:03o}"));
            }
        }
    }
}

/// A file name as the human output prints it: as it is, or quoted when it holds an unsafe
/// character or starts with `"`.
pub(crate) fn path(name: &str) -> Cow<'_, str> {
    if !name.starts_with('"') && !name.chars().any(is_unsafe) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    out.push('"');
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if is_unsafe(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    out.push('"');
    Cow::Owned(out)
}

/// A line's text as a terminal is given it: every unsafe character but tab escaped.
pub(crate) fn text(line: &str) -> Cow<'_, str> {
    let unsafe_here = |c: char| c != '\t' && is_unsafe(c);
    if !line.chars().any(unsafe_here) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        if unsafe_here(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::{path, text};

    fn check(name: &str, expected: &str) {
        assert_eq!(path(name), expected, "{name:?}");
    }

    #[test]
    fn names_that_could_forge_lines_or_steer_the_terminal_are_quoted() {
        check("src/main.rs", "src/main.rs");
        check("日本語/名前.rs", "日本語/名前.rs");
        check("name with space.txt", "name with space.txt");
        check("a\\b \"c\".txt", "a\\b \"c\".txt");
        check("x\nforged.rs:1:1:needle", "\"x\\nforged.rs:1:1:needle\"");
        check("tab\there", "\"tab\\there\"");
        check("esc\u{1b}[31mred", "\"esc\\033[31mred\"");
        check("bell\u{7}del\u{7f}", "\"bell\\adel\\177\"");
        check("c1\u{9b}31m", "\"c1\\302\\23331m\"");
        check("evil\u{202E}txt.exe", "\"evil\\342\\200\\256txt.exe\"");
        check("zero\u{200B}width", "\"zero\\342\\200\\213width\"");
        check("line\u{2028}sep", "\"line\\342\\200\\250sep\"");
        check("tag\u{E0041}", "\"tag\\363\\240\\201\\201\"");
        // Once quoted, a quote and a backslash are escaped, so the quoting is never ambiguous.
        check("\"x\\n.rs\"", "\"\\\"x\\\\n.rs\\\"\"");
        check("q\"\n\\", "\"q\\\"\\n\\\\\"");
    }

    #[test]
    fn text_on_a_terminal_escapes_control_and_format_characters_but_tab() {
        let check = |line: &str, expected: &str| assert_eq!(text(line), expected, "{line:?}");
        check("fn main() {}", "fn main() {}");
        check("\tindented \"quoted\" \\n", "\tindented \"quoted\" \\n");
        check("\u{1b}]0;title\u{7}", "\\033]0;title\\a");
        check("over\rwrite", "over\\rwrite");
        check("let x = \"\u{202E}\";", "let x = \"\\342\\200\\256\";");
        check("日本語", "日本語");
    }
}
