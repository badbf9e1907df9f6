//! The query rules: one validator behind the literal search, the facade's index modes and the
//! tool's arguments.

use index_contract::limits::{MAX_PATH_BYTES, MAX_QUERY_BYTES};
use index_contract::{ErrorCode, IndexError, SearchMode, SearchRequest};
use index_guard::{
    MAX_PATH_CHARS, MAX_QUERY_CHARS, check_index_query, check_query, check_scope_chars,
    check_tool_query,
};

/// Which validator a row goes through.
#[derive(Debug, Clone, Copy)]
enum Entry {
    /// `check_query`: the literal search.
    Literal,
    /// `check_index_query` in this mode: the facade.
    Index(SearchMode),
    /// `check_tool_query`: the tool's `query` argument.
    Tool,
    /// `check_scope_chars`: the tool's `path` argument.
    ToolPath,
}

fn check(entry: Entry, input: &str, expected: Result<(), ErrorCode>) {
    let got = match entry {
        Entry::Literal => check_query(input),
        Entry::Index(mode) => check_index_query(input, mode),
        Entry::Tool => check_tool_query(&SearchRequest::new(input, SearchMode::Literal)),
        Entry::ToolPath => check_scope_chars(input),
    };
    assert_eq!(
        got.clone().map_err(|e| e.code()),
        expected,
        "{entry:?} on a {}-byte input: {got:?}",
        input.len()
    );
}

#[test]
fn query_rules_keep_their_codes_at_every_entry_point() {
    let at_byte_cap = "x".repeat(MAX_QUERY_BYTES);
    let over_byte_cap = "x".repeat(MAX_QUERY_BYTES + 1);
    let at_char_cap = "é".repeat(MAX_QUERY_CHARS);
    let over_char_cap = "x".repeat(MAX_QUERY_CHARS + 1);
    let over_char_cap_multiline = format!("{over_char_cap}\n");
    let fixed = [
        Entry::Literal,
        Entry::Index(SearchMode::IndexedLiteral),
        Entry::Index(SearchMode::Literal),
    ];
    for entry in fixed {
        check(entry, "fn main", Ok(()));
        check(entry, &at_byte_cap, Ok(()));
        check(entry, "", Err(ErrorCode::Unsupported));
        check(entry, &over_byte_cap, Err(ErrorCode::Limit));
        check(entry, "a\nb", Err(ErrorCode::Unsupported));
        check(entry, "a\rb", Err(ErrorCode::Unsupported));
        check(entry, "a\0b", Err(ErrorCode::Unsupported));
        // The cap is judged before the line rule, as before the rules were merged.
        check(entry, &format!("{over_byte_cap}\n"), Err(ErrorCode::Limit));
    }
    let semantic = Entry::Index(SearchMode::Semantic);
    check(semantic, "where is the config parsed", Ok(()));
    check(semantic, "", Err(ErrorCode::Unsupported));
    check(semantic, &over_byte_cap, Err(ErrorCode::Limit));

    check(Entry::Tool, "fn main", Ok(()));
    check(Entry::Tool, &at_char_cap, Ok(()));
    check(Entry::Tool, "", Err(ErrorCode::Unsupported));
    check(Entry::Tool, &over_char_cap, Err(ErrorCode::Limit));
    check(Entry::Tool, &over_char_cap_multiline, Err(ErrorCode::Limit));
    check(Entry::Tool, "a\nb", Err(ErrorCode::Unsupported));
    check(Entry::Tool, "a\0b", Err(ErrorCode::Unsupported));

    check(Entry::ToolPath, "", Ok(()));
    check(Entry::ToolPath, &"é".repeat(MAX_PATH_CHARS), Ok(()));
    check(
        Entry::ToolPath,
        &"x".repeat(MAX_PATH_CHARS + 1),
        Err(ErrorCode::Limit),
    );
}

#[test]
fn semantic_queries_may_span_lines() {
    check(
        Entry::Index(SearchMode::Semantic),
        "parse the config\nthen validate it",
        Ok(()),
    );
}

#[test]
fn a_query_within_the_character_cap_is_within_the_byte_cap() {
    // Four-byte characters are the widest UTF-8 has.
    let widest = "\u{1F600}".repeat(MAX_QUERY_CHARS);
    assert!(widest.len() <= MAX_QUERY_BYTES);
    check(Entry::Tool, &widest, Ok(()));
    assert!("\u{1F600}".repeat(MAX_PATH_CHARS).len() <= MAX_PATH_BYTES);
}

#[test]
fn cap_messages_are_rendered_from_the_limits_table() {
    let message = |r: Result<(), IndexError>| r.unwrap_err().to_string();
    let bytes = message(check_query(&"x".repeat(MAX_QUERY_BYTES + 1)));
    assert!(
        bytes.contains(&format!("is longer than {MAX_QUERY_BYTES} bytes")),
        "{bytes}"
    );
    let chars = message(check_tool_query(&SearchRequest::new(
        "x".repeat(MAX_QUERY_CHARS + 1),
        SearchMode::Literal,
    )));
    assert!(
        chars.contains(&format!("is longer than {MAX_QUERY_CHARS} characters")),
        "{chars}"
    );
    let path = message(check_scope_chars(&"x".repeat(MAX_PATH_CHARS + 1)));
    assert!(
        path.contains(&format!("is longer than {MAX_PATH_CHARS} characters")),
        "{path}"
    );
}
