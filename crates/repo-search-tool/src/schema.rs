//! The tool's JSON Schemas (draft 2020-12): the arguments a call takes, and the answer it gives.

use index_contract::{
    ErrorCode, SearchMode,
    limits::{MAX_CONTEXT_LINES, MAX_FILE_FILTERS, MAX_OFFSET},
};
use serde_json::{Map, Value, json};

use crate::path::path_pattern;
use crate::spec::{MAX_PATH_CHARS, MAX_QUERY_CHARS, ToolOption, ToolSpec};

impl ToolSpec {
    /// The JSON Schema (draft 2020-12) of the arguments. Its `mode` enum is exactly the exposed
    /// modes; an option appears only when an exposed mode honours it, and a mode that does not
    /// honour an offered option is held to its neutral value by an `if`/`then` rule. Every rule
    /// [`ToolSpec::parse_arguments`] applies is expressed in it.
    pub fn schema(&self) -> Value {
        let modes: Vec<&str> = self.modes().iter().map(|m| m.as_str()).collect();
        let mut mode_help = String::from("How to search. ");
        for m in self.modes() {
            mode_help.push_str(match m {
                SearchMode::Literal => "`literal`: scan the working tree now; exact and always current; honours every option. ",
                SearchMode::IndexedLiteral => "`indexed_literal`: the same match answered from the index; faster on large repositories, one hit per file, ranked. ",
                SearchMode::Semantic => "`semantic`: find code by meaning from the index; `query` is a natural-language description. ",
            });
        }
        let offered = self.offered_options();
        let multiline = offered.contains(&ToolOption::Multiline);
        let query_help = if multiline {
            "The text to find, on one line unless `multiline` is true, for example `fn parse_config` or `TODO(`. A fixed string unless `regex` is true."
        } else if offered.contains(&ToolOption::Regex) {
            "The text to find, on one line, for example `fn parse_config` or `TODO(`. A fixed string unless `regex` is true."
        } else {
            "The exact text to find, on one line, for example `fn parse_config` or `TODO(`. Matched as a fixed string, not a regular expression."
        };
        let mut properties = json!({
            "query": {
                "type": "string",
                "description": query_help,
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "pattern": if multiline { ANY_LINES } else { ONE_LINE }
            },
            "mode": {
                "type": "string",
                "enum": modes,
                "default": self.default_mode().as_str(),
                "description": mode_help.trim_end()
            },
            "path": {
                "type": "string",
                "description": "Optional directory or file to search within, relative to the repository root, with `/` separators, for example `src` or `src/main.rs`. No leading `/`, no `..`.",
                "maxLength": MAX_PATH_CHARS,
                "pattern": path_pattern()
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": self.limits().max_results(),
                "default": self.limits().max_results(),
                "description": "The most hits to return. Keep it small (for example 50) to save context; `complete: false` tells you when there were more."
            },
            "case_insensitive": {
                "type": "boolean",
                "default": false,
                "description": "Match regardless of case (Unicode simple case folding). Default: case-sensitive."
            },
            "output": {
                "type": "string",
                "enum": self.outputs(self.modes()),
                "default": "content",
                "description": "`content`: one hit per matching line (index modes: per file). `files`: one hit per matching file, at its first match. `count`: as `files`, with `count`, the file's number of matching lines."
            }
        });
        let props = properties.as_object_mut().expect("a JSON object literal");
        for option in offered.iter().filter(|o| **o != ToolOption::Count) {
            props.insert(option.name().into(), option.schema());
        }
        let mut rules = vec![json!({
            "if": {
                "anyOf": [
                    { "required": ["context_before"], "properties": { "context_before": { "minimum": 1 } } },
                    { "required": ["context_after"], "properties": { "context_after": { "minimum": 1 } } }
                ]
            },
            "then": { "properties": { "output": { "const": "content" } } }
        })];
        if multiline {
            // Line breaks only with `multiline: true`.
            rules.push(json!({
                "if": { "required": ["multiline"], "properties": { "multiline": { "const": true } } },
                "else": { "properties": { "query": { "pattern": ONE_LINE } } }
            }));
        }
        for &mode in self.modes() {
            let honoured = self.options_for(mode);
            let mut restrict = Map::new();
            for option in offered.iter().filter(|o| !honoured.contains(o)) {
                let (key, neutral) = match option {
                    // A mode that takes only excluding globs: every entry starts with `!`.
                    ToolOption::Glob if honoured.contains(&ToolOption::ExcludeGlob) => {
                        ("glob", json!({ "items": { "pattern": "^!" } }))
                    }
                    // Held to no globs by the include rule, or allowed some by the exclude rule.
                    ToolOption::ExcludeGlob => continue,
                    _ => option.neutral(),
                };
                restrict.insert(key.into(), neutral);
            }
            let outputs = self.outputs(&[mode]);
            if outputs.len() < self.outputs(self.modes()).len() {
                restrict.insert("output".into(), json!({ "enum": outputs }));
            }
            if restrict.is_empty() {
                continue;
            }
            let named = json!({ "required": ["mode"], "properties": { "mode": { "const": mode.as_str() } } });
            let condition = if mode == self.default_mode() {
                json!({ "anyOf": [named, { "not": { "required": ["mode"] } }] })
            } else {
                named
            };
            rules.push(json!({ "if": condition, "then": { "properties": restrict } }));
        }
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "repo_search arguments",
            "type": "object",
            "properties": properties,
            "required": ["query"],
            "additionalProperties": false,
            "allOf": rules
        })
    }

    /// The JSON Schema of a successful answer (MCP's `outputSchema`): what
    /// [`RepoSearchTool::call`](crate::RepoSearchTool::call) returns.
    pub fn output_schema(&self) -> Value {
        let modes: Vec<&str> = self.modes().iter().map(|m| m.as_str()).collect();
        let lines = json!({ "type": "array", "items": { "type": "string" } });
        let counts = json!({ "type": "integer", "minimum": 0 });
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "repo_search answer",
            "type": "object",
            "properties": {
                "mode": { "type": "string", "enum": modes },
                "hits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": { "type": "string" },
                            "line": { "type": "integer", "minimum": 1 },
                            "column": { "type": "integer", "minimum": 1 },
                            "snippet": { "type": "string" },
                            "snippet_truncated": { "type": "boolean" },
                            "score": { "type": "number", "minimum": 0, "maximum": 1 },
                            "count": { "type": "integer", "minimum": 1 },
                            "before": lines,
                            "after": lines
                        },
                        "required": ["path", "line", "column", "snippet", "snippet_truncated"]
                    }
                },
                "complete": { "type": "boolean" },
                "stopped": {
                    "description": "Why `complete` is false: `max_results` (more hits follow: \
                        page on), `deadline`, `cancelled`, or `unserved_files` (matching files \
                        whose names no answer carries, counted in `stats.files_skipped`).",
                    "type": ["string", "null"],
                    "enum": ["max_results", "deadline", "cancelled", "unserved_files", null]
                },
                "stats": {
                    "type": "object",
                    "properties": {
                        "files_searched": counts,
                        "files_skipped": {
                            "type": "object",
                            "properties": {
                                "binary": counts,
                                "non_utf8_path": {
                                    "description": "Matching files whose names are not UTF-8.",
                                    "type": "integer",
                                    "minimum": 0
                                },
                                "unreadable": counts,
                                "not_reached": counts,
                                "refused_path": {
                                    "description": "Matching files whose names the trust gate \
                                        refuses (invisible, bidi or look-alike characters).",
                                    "type": "integer",
                                    "minimum": 0
                                }
                            },
                            "additionalProperties": counts
                        },
                        "backend_hits": counts,
                        "duplicates_removed": counts,
                        "full_scan": { "type": "boolean" }
                    }
                },
                "indexed": {
                    "type": "object",
                    "properties": {
                        "mode": { "type": "string" },
                        "state": { "type": "string" },
                        "source_revision": { "type": ["string", "null"] },
                        "updated_at": { "type": ["integer", "null"] }
                    }
                },
                "untrusted_index": { "type": "boolean" },
                "next_offset": { "type": "integer", "minimum": 1 },
                "page_token": { "type": "string" }
            },
            "required": ["mode", "hits", "complete", "stopped", "stats"]
        })
    }
}

/// A query on one line, without NUL.
const ONE_LINE: &str = "^[^\\n\\r\\u0000]*$";
/// A query without NUL, on any number of lines (`multiline: true`).
const ANY_LINES: &str = "^[^\\u0000]*$";

impl ToolOption {
    /// The schema's restriction for a mode that does not honour the option: its neutral value.
    fn neutral(self) -> (&'static str, Value) {
        let v = match self {
            ToolOption::Regex
            | ToolOption::Multiline
            | ToolOption::IncludeHidden
            | ToolOption::IncludeIgnored => json!({ "const": false }),
            ToolOption::ExcludeGlob | ToolOption::Glob | ToolOption::Type => {
                json!({ "maxItems": 0 })
            }
            ToolOption::Count => json!({ "enum": ["content", "files"] }),
            ToolOption::ContextBefore | ToolOption::ContextAfter | ToolOption::Offset => {
                json!({ "maximum": 0 })
            }
            ToolOption::PageToken => json!(false),
        };
        (self.name(), v)
    }

    /// The option's property schema.
    fn schema(self) -> Value {
        let list = |what: &str| {
            json!({
                "type": "array",
                "maxItems": MAX_FILE_FILTERS,
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_PATH_CHARS,
                    "pattern": "^[^\\u0000]*$"
                },
                "description": what
            })
        };
        let context = |side: &str| {
            json!({
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_CONTEXT_LINES,
                "default": 0,
                "description": format!("Lines of context {side} each matching line (ripgrep's -{}), for `output: content`.", if side == "before" { "B" } else { "A" })
            })
        };
        match self {
            ToolOption::Regex => json!({
                "type": "boolean",
                "default": false,
                "description": "Treat `query` as a regular expression in ripgrep's syntax (the Rust regex crate: no look-around or backreferences). Default: a fixed string."
            }),
            ToolOption::Multiline => json!({
                "type": "boolean",
                "default": false,
                "description": "Let a match span lines (ripgrep's -U): with `regex: true`, `\\n` matches a line break, for example `fn main\\(\\)\\s*\\{\\n\\s*let`; `.` still stops at one. Each match is a hit at the line where it starts; `output: count` counts matches. Default: line by line."
            }),
            ToolOption::ExcludeGlob | ToolOption::Glob => list(
                "ripgrep -g globs on repository-relative paths: a file must match an include glob when there is one; a glob starting with `!` excludes; later globs win. For example [\"*.rs\"] or [\"src/**\", \"!**/*_test.go\"].",
            ),
            ToolOption::Type => list(
                "ripgrep file types (-t): a file must be of one of them, for example [\"rust\"], [\"py\"], [\"c\", \"cpp\"], [\"js\", \"ts\"], [\"go\"], [\"java\"].",
            ),
            ToolOption::IncludeHidden => json!({
                "type": "boolean",
                "default": false,
                "description": "Also search hidden files and directories (ripgrep's --hidden)."
            }),
            ToolOption::IncludeIgnored => json!({
                "type": "boolean",
                "default": false,
                "description": "Also search files that .gitignore and other ignore rules exclude (ripgrep's --no-ignore)."
            }),
            // `output` is always in the schema; `count` only widens its enum.
            ToolOption::Count => json!({ "type": "string" }),
            ToolOption::ContextBefore => context("before"),
            ToolOption::ContextAfter => context("after"),
            ToolOption::Offset => json!({
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_OFFSET,
                "default": 0,
                "description": "Skip this many hits: pass the previous answer's `next_offset` (with its `page_token`) to read the next page."
            }),
            ToolOption::PageToken => json!({
                "type": "string",
                "pattern": "^p1-[0-9a-f]{32}$",
                "description": format!("The previous answer's `page_token`, sent with `offset: next_offset`. If the results changed since that page, the call fails with {} instead of returning a shifted page: start again from offset 0.", ErrorCode::Stale.as_str())
            }),
        }
    }
}
