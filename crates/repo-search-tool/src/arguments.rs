//! Argument parsing: a call's JSON arguments checked by the schema's rules and built into a
//! [`SearchRequest`].

use index_contract::{
    ErrorCode, IndexError, OutputMode, SearchMode, SearchRequest,
    limits::{MAX_CONTEXT_LINES, MAX_FILE_FILTERS, MAX_OFFSET},
};
use index_guard::{check_options, check_page_token, check_tool_query};
use serde_json::{Map, Value};

use crate::path::check_path;
use crate::spec::{MAX_PATH_CHARS, ToolSpec};

impl ToolSpec {
    /// Validates call arguments by the schema's rules and builds the request. An error names the
    /// offending argument. The syntax of a regex, a glob or a type name, which no schema can
    /// express, is checked when the call runs.
    pub fn parse_arguments(&self, arguments: &Value) -> Result<SearchRequest, IndexError> {
        let Some(obj) = arguments.as_object() else {
            return Err(invalid("arguments", "must be a JSON object"));
        };
        let offered = self.offered_options();
        for key in obj.keys() {
            let base = matches!(
                key.as_str(),
                "query" | "mode" | "path" | "max_results" | "case_insensitive" | "output"
            );
            if !base && !offered.iter().any(|o| o.name() == key) {
                return Err(invalid(
                    "arguments",
                    "has a property this tool does not take; the schema's `properties` lists them",
                ));
            }
        }
        let query = match obj.get("query") {
            None => return Err(invalid("query", "is required")),
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid("query", "must be a string")),
        };
        let mode = match obj.get("mode") {
            None => self.default_mode(),
            Some(Value::String(s)) => match SearchMode::parse(s) {
                Some(m) if self.modes().contains(&m) => m,
                Some(m) => return Err(IndexError::ModeNotAllowed { mode: m }),
                None => return Err(invalid("mode", "is not one of the modes this tool offers")),
            },
            Some(_) => return Err(invalid("mode", "must be a string")),
        };
        let path = match obj.get("path") {
            None => None,
            Some(Value::String(p)) => {
                check_path(p)?;
                Some(p.clone())
            }
            Some(_) => return Err(invalid("path", "must be a string")),
        };
        let max_results = match obj.get("max_results") {
            None => None,
            Some(v) => {
                let n = integer(v, "max_results")?;
                if n < 1 || n > self.limits().max_results() as u64 {
                    return Err(IndexError::InvalidArgument {
                        argument: "max_results",
                        problem: "is outside 1..=the result cap advertised in the schema",
                        code: ErrorCode::Limit,
                    });
                }
                Some(n as usize)
            }
        };
        let mut request = SearchRequest::new(query.clone(), mode);
        request.path = path;
        request.max_results = max_results;
        request.case_insensitive = boolean(obj, "case_insensitive")?;
        request.regex = boolean(obj, "regex")?;
        request.multiline = boolean(obj, "multiline")?;
        check_tool_query(&request)?;
        request.files.include_hidden = boolean(obj, "include_hidden")?;
        request.files.include_ignored = boolean(obj, "include_ignored")?;
        request.files.globs = strings(obj, "glob")?;
        request.files.types = strings(obj, "type")?;
        request.output = match obj.get("output") {
            None => OutputMode::Content,
            Some(Value::String(s)) => OutputMode::parse(s)
                .ok_or_else(|| invalid("output", "must be `content`, `files` or `count`"))?,
            Some(_) => return Err(invalid("output", "must be a string")),
        };
        request.context.before =
            bounded(obj, "context_before", u64::from(MAX_CONTEXT_LINES))? as u32;
        request.context.after = bounded(obj, "context_after", u64::from(MAX_CONTEXT_LINES))? as u32;
        request.offset = bounded(obj, "offset", MAX_OFFSET as u64)? as usize;
        request.page_token = match obj.get("page_token") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(invalid("page_token", "must be a string")),
        };
        check_options(&request, self.support(mode))?;
        if let Some(token) = &request.page_token {
            check_page_token(token)?;
        }
        Ok(request)
    }
}

/// A JSON integer (JSON Schema's "integer" admits any number with a zero fractional part, such as
/// 5.0); a negative one is refused here, the upper bound is the caller's to check.
fn integer(v: &Value, argument: &'static str) -> Result<u64, IndexError> {
    let n = match v {
        Value::Number(n) => n
            .as_u64()
            .map(|u| u as f64)
            .or_else(|| n.as_i64().map(|i| i as f64))
            .or_else(|| n.as_f64()),
        _ => None,
    };
    let Some(n) = n.filter(|f| f.is_finite() && f.fract() == 0.0) else {
        return Err(invalid(argument, "must be an integer"));
    };
    if n < 0.0 {
        // Below every minimum the schema sets.
        return Err(IndexError::InvalidArgument {
            argument,
            problem: "is below the minimum the schema advertises",
            code: ErrorCode::Limit,
        });
    }
    Ok(if n >= u64::MAX as f64 {
        u64::MAX
    } else {
        n as u64
    })
}

/// An optional integer argument in `0..=max`, 0 when absent.
fn bounded(obj: &Map<String, Value>, argument: &'static str, max: u64) -> Result<u64, IndexError> {
    let Some(v) = obj.get(argument) else {
        return Ok(0);
    };
    let n = integer(v, argument)?;
    if n > max {
        return Err(IndexError::InvalidArgument {
            argument,
            problem: "is above the maximum the schema advertises",
            code: ErrorCode::Limit,
        });
    }
    Ok(n)
}

/// An optional boolean argument, false when absent.
fn boolean(obj: &Map<String, Value>, argument: &'static str) -> Result<bool, IndexError> {
    match obj.get(argument) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(argument, "must be true or false")),
    }
}

/// An optional array of non-empty strings without NUL, each within [`MAX_PATH_CHARS`], at most
/// [`MAX_FILE_FILTERS`] of them.
fn strings(obj: &Map<String, Value>, argument: &'static str) -> Result<Vec<String>, IndexError> {
    let Some(v) = obj.get(argument) else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = v else {
        return Err(invalid(argument, "must be an array of strings"));
    };
    if items.len() > MAX_FILE_FILTERS {
        return Err(IndexError::InvalidArgument {
            argument,
            problem: "has more entries than the schema's maxItems",
            code: ErrorCode::Limit,
        });
    }
    items
        .iter()
        .map(|item| match item {
            Value::String(s) if s.is_empty() || s.contains('\0') => Err(invalid(
                argument,
                "has an empty entry or one with a NUL byte",
            )),
            Value::String(s) if s.chars().count() > MAX_PATH_CHARS => {
                Err(IndexError::InvalidArgument {
                    argument,
                    problem: "has an entry longer than the schema's maxLength",
                    code: ErrorCode::Limit,
                })
            }
            Value::String(s) => Ok(s.clone()),
            _ => Err(invalid(argument, "must be an array of strings")),
        })
        .collect()
}

fn invalid(argument: &'static str, problem: &'static str) -> IndexError {
    IndexError::InvalidArgument {
        argument,
        problem,
        code: ErrorCode::Unsupported,
    }
}
