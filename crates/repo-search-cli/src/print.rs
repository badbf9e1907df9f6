//! What a person reads: hits as ripgrep prints them, and an index's status.

use std::io::{IsTerminal, Write};

use serde_json::Value;

use crate::quote;

/// `repo-search status` for a person: the index's state, revision, age and size, then where it
/// lives (`place`, one line).
pub(crate) fn print_status(status: &index_contract::IndexStatus, files: u64, place: &str) {
    println!("state:     {}", status.state);
    println!(
        "revision:  {}",
        status.source_revision.as_deref().unwrap_or("-")
    );
    println!(
        "updated:   {}",
        status.updated_at.map_or("-".into(), |t| {
            when(t.0, index_contract::UnixMillis::now().0)
        })
    );
    println!("files:     {files}");
    println!("{place}");
}

/// A time for a person: the UTC date and time in ISO 8601, and how long ago it was
/// (`2026-12-02T10:27:07Z (3 min ago)`). Epoch milliseconds are for `--json`.
pub(crate) fn when(millis: u64, now: u64) -> String {
    let secs = millis / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm, for the proleptic Gregorian calendar.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let age = match now.saturating_sub(millis) / 1000 {
        _ if now < millis => "in the future".to_owned(),
        s if s < 60 => format!("{s} s ago"),
        s if s < 3600 => format!("{} min ago", s / 60),
        s if s < 86_400 => format!("{} h ago", s / 3600),
        s => format!("{} days ago", s / 86_400),
    };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z ({age})",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// A result's hits.
pub(crate) fn hits(result: &Value) -> Vec<Value> {
    result["hits"].as_array().cloned().unwrap_or_default()
}

/// How hits are shown to a person.
pub(crate) struct Style<'a> {
    /// The fixed string to highlight, when the match is that string exactly.
    pub(crate) highlight: Option<&'a str>,
    pub(crate) color: bool,
    /// `-l`: print each hit's path alone.
    pub(crate) files_only: bool,
}

/// Prints hits as ripgrep does: `path:line:column:text`, context lines as `path-line-text`
/// with `--` between separate groups, `path` alone for `-l` and `path:count` for `-c`. Names and,
/// on a terminal, text are made safe to print first ([`quote`]).
pub(crate) struct Printer<'a> {
    style: Style<'a>,
    out: std::io::StdoutLock<'static>,
    /// Whether stdout is a terminal, which text must not steer.
    terminal: bool,
    /// The file and line last printed, so that overlapping context is printed once.
    last: Option<(String, u64)>,
    /// The last hit printed, whose after-context waits for the hit that follows it.
    pending: Option<Value>,
    pub(crate) printed: u64,
}

impl<'a> Printer<'a> {
    pub(crate) fn new(style: Style<'a>) -> Printer<'a> {
        Printer {
            style,
            out: std::io::stdout().lock(),
            terminal: std::io::stdout().is_terminal(),
            last: None,
            pending: None,
            printed: 0,
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.style.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// `line` as this output may print it.
    fn text<'t>(&self, line: &'t str) -> std::borrow::Cow<'t, str> {
        if self.terminal {
            quote::text(line)
        } else {
            std::borrow::Cow::Borrowed(line)
        }
    }

    pub(crate) fn print(&mut self, hits: &[Value]) {
        for h in hits {
            self.printed += 1;
            let path = h["path"].as_str().unwrap_or("");
            let shown_path = self.paint("35", &quote::path(path));
            if let Some(count) = h["count"].as_u64() {
                let _ = writeln!(self.out, "{shown_path}:{count}");
                continue;
            }
            if self.style.files_only {
                let _ = writeln!(self.out, "{shown_path}");
                continue;
            }
            // The previous hit's after-context ends where this hit's own line begins.
            self.flush_after(Some(h));
            let line = h["line"].as_u64().unwrap_or(0);
            let before = h["before"].as_array().cloned().unwrap_or_default();
            let first = line.saturating_sub(before.len() as u64);
            // A gap since the last line printed in this file (or another file) starts a group.
            let contiguous = self
                .last
                .as_ref()
                .is_some_and(|(p, l)| p == path && *l + 1 >= first);
            let with_context = h.get("before").is_some() || h.get("after").is_some();
            if with_context && self.last.is_some() && !contiguous {
                let _ = writeln!(self.out, "--");
            }
            let from = match &self.last {
                Some((p, l)) if p == path => *l + 1,
                _ => 0,
            };
            for (i, text) in before.iter().enumerate() {
                let n = first + i as u64;
                if n >= from {
                    self.context_line(&shown_path, n, text.as_str().unwrap_or(""));
                }
            }
            if line >= from {
                let snippet = &*self.text(h["snippet"].as_str().unwrap_or(""));
                let col = h["column"].as_u64().unwrap_or(0);
                let text = match self.style.highlight {
                    Some(q) if self.style.color => {
                        snippet.replacen(q, &format!("\x1b[1;31m{q}\x1b[0m"), 1)
                    }
                    _ => snippet.to_owned(),
                };
                let n = self.paint("32", &line.to_string());
                let _ = writeln!(self.out, "{shown_path}:{n}:{col}:{text}");
            }
            self.last = Some((path.to_owned(), line.max(from.saturating_sub(1))));
            // Its after-context waits for the next hit, which may come on the next page: a line
            // that is the next hit's own is printed as a match, not as context.
            self.pending = Some(h.clone());
        }
    }

    /// Prints the pending hit's after-context, up to `next`'s line when it is in the same file.
    fn flush_after(&mut self, next: Option<&Value>) {
        let Some(h) = self.pending.take() else {
            return;
        };
        let path = h["path"].as_str().unwrap_or("");
        let shown_path = self.paint("35", &quote::path(path));
        let line = h["line"].as_u64().unwrap_or(0);
        let stop = next
            .filter(|next| next["path"] == h["path"])
            .and_then(|next| next["line"].as_u64())
            .unwrap_or(u64::MAX);
        let mut last = match &self.last {
            Some((p, l)) if p == path => *l,
            _ => line,
        };
        for (k, text) in h["after"].as_array().into_iter().flatten().enumerate() {
            let n = line + 1 + k as u64;
            if n >= stop {
                break;
            }
            if n > last {
                self.context_line(&shown_path, n, text.as_str().unwrap_or(""));
                last = n;
            }
        }
        self.last = Some((path.to_owned(), last));
    }

    fn context_line(&mut self, path: &str, n: u64, text: &str) {
        let n = self.paint("32", &n.to_string());
        let text = self.text(text);
        let _ = writeln!(self.out, "{path}-{n}-{text}");
    }

    /// Says on stderr why the answer is not every hit there is, unless the person asked for
    /// fewer.
    pub(crate) fn finish(&mut self, result: &Value, cut_as_asked: bool) {
        self.flush_after(None);
        let _ = self.out.flush();
        if result["complete"] == false && !cut_as_asked {
            let why = result["stopped"].as_str().unwrap_or("unknown");
            if why == "unserved_files" {
                let skipped = &result["stats"]["files_skipped"];
                let n = ["non_utf8_path", "refused_path"]
                    .iter()
                    .filter_map(|k| skipped[k].as_u64())
                    .sum::<u64>();
                eprintln!(
                    "repo-search: incomplete answer: {n} matching file(s) not shown, their names \
                     are not UTF-8 or could mislead (rg or ls -b shows them)"
                );
            } else {
                eprintln!(
                    "repo-search: incomplete answer (stopped: {why}); narrow the query, --path or --glob"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::when;

    fn check(millis: u64, now: u64, expected: &str) {
        assert_eq!(when(millis, now), expected, "{millis} at {now}");
    }

    #[test]
    fn status_times_read_as_an_iso_date_and_an_age() {
        check(0, 0, "1970-01-01T00:00:00Z (0 s ago)");
        check(
            951_782_400_000,
            951_782_459_999,
            "2000-02-29T00:00:00Z (59 s ago)",
        );
        check(
            1_796_207_227_000,
            1_796_207_407_000,
            "2026-12-02T10:27:07Z (3 min ago)",
        );
        check(
            1_796_207_227_000,
            1_796_214_427_000,
            "2026-12-02T10:27:07Z (2 h ago)",
        );
        check(
            1_796_207_227_000,
            1_796_466_427_000,
            "2026-12-02T10:27:07Z (3 days ago)",
        );
        check(
            4_102_444_799_000,
            4_102_444_799_000,
            "2099-12-31T23:59:59Z (0 s ago)",
        );
        check(
            1_796_207_227_000,
            1_796_207_226_000,
            "2026-12-02T10:27:07Z (in the future)",
        );
    }
}
