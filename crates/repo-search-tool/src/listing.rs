//! The tool's MCP listing: its name, title, description for a language model, schemas and
//! annotations.

use index_contract::ErrorCode;
use serde_json::{Map, Value, json};

use crate::spec::{ToolOption, ToolSpec};

/// The tool's name.
pub const TOOL_NAME: &str = "repo_search";
/// The tool's human-readable title.
pub const TOOL_TITLE: &str = "Search the repository";

impl ToolSpec {
    /// A description for the tool listing, written for a language model choosing how to call it.
    pub fn description(&self) -> String {
        let offered = self.offered_options();
        let has = |o: ToolOption| offered.contains(&o);
        let mut d = String::from(
            "Search the files of this repository's working tree, like ripgrep. `query` is a fixed \
             string",
        );
        if has(ToolOption::Regex) {
            d.push_str(", or a regular expression (ripgrep's syntax) with `regex: true`");
        }
        if has(ToolOption::Multiline) {
            d.push_str(" (add `multiline: true` for a regex that spans lines, such as `a\\nb`)");
        }
        d.push_str(
            ". Returns matching lines as {path, line, column, snippet}, paths relative to the \
             repository root, ordered by path then line. Files ignored by git, hidden files and \
             binary files are not searched",
        );
        if has(ToolOption::IncludeHidden) || has(ToolOption::IncludeIgnored) {
            d.push_str(" unless `include_hidden` or `include_ignored` says so");
        }
        d.push('.');
        if has(ToolOption::Glob) || has(ToolOption::Type) {
            d.push_str(
                " Narrow the files with `path`, `glob` (for example [\"*.rs\", \"!tests/**\"]) \
                 and `type` (for example [\"rust\"]).",
            );
        }
        d.push_str(" `output: files` gives one hit per matching file");
        if has(ToolOption::Count) {
            d.push_str("; `output: count` adds each file's count of matching lines");
        }
        d.push('.');
        if has(ToolOption::ContextBefore) {
            d.push_str(" `context_before`/`context_after` add neighbouring lines.");
        }
        d.push_str(
            " Check `complete`: when false, `stopped` says why (max_results, deadline or \
             cancelled) and more matches may exist; narrow the query, `path` or `glob` rather \
             than raising max_results. `unserved_files` means files that match have names no \
             answer carries (not UTF-8, or invisible or look-alike characters), counted in \
             `stats.files_skipped`; list them with other tools.",
        );
        if has(ToolOption::Offset) {
            d.push_str(
                " To read on, call again with `offset: next_offset` and the `page_token` of the \
                 previous answer.",
            );
        }
        if self.modes().iter().any(|m| m.is_indexed()) {
            d.push_str(&format!(
                " Index modes answer from a prebuilt index: one hit per file, best first, with a \
                 relevance `score`; their text is untrusted (`untrusted_index: true`), so read \
                 the file before relying on or editing it. An option an index mode cannot \
                 honour is refused with {}; mode `literal` honours every option.",
                ErrorCode::Unsupported.as_str()
            ));
        }
        d
    }

    /// The tool's listing entry as MCP spells it: name, title, description, input and output
    /// schemas, and the annotations (read-only, closed world).
    pub fn listing(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), TOOL_NAME.into());
        m.insert("title".into(), TOOL_TITLE.into());
        m.insert("description".into(), self.description().into());
        m.insert("inputSchema".into(), self.schema());
        m.insert("outputSchema".into(), self.output_schema());
        m.insert(
            "annotations".into(),
            json!({
                "title": TOOL_TITLE,
                "readOnlyHint": true,
                "destructiveHint": false,
                "idempotentHint": true,
                "openWorldHint": false
            }),
        );
        Value::Object(m)
    }
}
