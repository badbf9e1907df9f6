//! The MCP server's stdio: a line layer of our own in front of `rmcp`.
//!
//! `rmcp`'s stdio transport drops a line it cannot parse and answers nothing, so a client that
//! sent malformed JSON waits forever. This layer reads stdin itself, one bounded line at a time,
//! answers every line that is not a usable message with a JSON-RPC error, and hands only valid
//! messages to `rmcp` through an in-memory [`Transport`]:
//!
//! - not UTF-8, not JSON (a lone surrogate, nesting deeper than `serde_json`'s limit of 128, a
//!   syntax error) or longer than [`MAX_LINE_BYTES`]: `-32700` Parse error, `"id": null`;
//! - JSON that is not a JSON-RPC message: `-32600` Invalid Request, with the request's id when it
//!   has a usable one;
//! - a request for a method this server serves whose `params` do not have that method's shape
//!   (which `rmcp` would take for an unknown method): `-32602` Invalid params, with its id.
//!
//! The server keeps serving after each of them.

use std::io::{BufRead, Write};

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};

/// The longest line read from a client, in bytes without its newline: as long as `rmcp`'s own
/// stdio limit, so a client cannot make the server buffer without bound.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC's code for input that is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a request.
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for parameters of the wrong shape.
const INVALID_PARAMS: i64 = -32602;

/// The request methods this server answers. Only for these is a params shape `rmcp` cannot read
/// a `-32602`: any other method is unknown here whatever its params, and `rmcp` says so.
const SERVED_METHODS: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

/// What one line from the client comes to.
#[derive(Debug)]
pub(crate) enum Line {
    /// A message for `rmcp`.
    Message(Box<ClientJsonRpcMessage>),
    /// An error response this layer sends itself.
    Reply(Value),
    /// Nothing: a blank line, or a notification that cannot be read (notifications get no reply).
    Skip,
}

/// A JSON-RPC error response with a fixed message.
fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// The answer to a line longer than [`MAX_LINE_BYTES`].
pub(crate) fn too_long() -> Value {
    error(
        Value::Null,
        PARSE_ERROR,
        "Parse error: the line is longer than 16 MiB",
    )
}

/// Reads one line (without its newline) the way the server will treat it.
pub(crate) fn classify(line: &[u8]) -> Line {
    // A UTF-8 byte order mark and a CR before the newline are tolerated, as `rmcp` does.
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    // `serde_json` refuses invalid UTF-8, lone surrogates and nesting deeper than 128 levels.
    let Ok(value) = serde_json::from_slice::<Value>(line) else {
        return Line::Reply(error(Value::Null, PARSE_ERROR, "Parse error"));
    };
    // An id is echoed only when it is one JSON-RPC allows; anything else could not be matched.
    let id = match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
        _ => None,
    };
    let method = value.get("method").and_then(Value::as_str);
    let is_notification = value.get("id").is_none() && method.is_some();
    let served = method.and_then(|m| SERVED_METHODS.into_iter().find(|s| *s == m));
    if let (Some(id), Some(method)) = (&id, served) {
        // JSON-RPC allows only structured params; MCP's are always an object.
        if value
            .get("params")
            .is_some_and(|p| !p.is_object() && !p.is_null())
        {
            return Line::Reply(invalid_params(id.clone(), method));
        }
    }
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        // `rmcp` reads a served method whose params it cannot parse as a custom request, and
        // would answer "method not found": the method is found, its params are wrong.
        Ok(JsonRpcMessage::Request(r))
            if matches!(&r.request, ClientRequest::CustomRequest(c)
                if SERVED_METHODS.contains(&c.method.as_str())) =>
        {
            Line::Reply(invalid_params(
                id.unwrap_or(Value::Null),
                served.unwrap_or("the request"),
            ))
        }
        Ok(message) => Line::Message(Box::new(message)),
        Err(_) if is_notification => Line::Skip,
        Err(_) => Line::Reply(error(
            id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid Request",
        )),
    }
}

fn invalid_params(id: Value, method: &str) -> Value {
    let message = match method {
        "tools/call" => {
            "Invalid params: tools/call takes an object with `name` (a string) and optionally \
             `arguments` (an object)"
        }
        "initialize" => {
            "Invalid params: initialize takes an object with `protocolVersion`, `capabilities` \
             and `clientInfo`"
        }
        "tools/list" => "Invalid params: tools/list takes an object, with optionally `cursor`",
        _ => "Invalid params: params must be an object",
    };
    error(id, INVALID_PARAMS, message)
}

/// One event of [`read_lines`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event<'a> {
    /// A whole line, without its newline.
    Line(&'a [u8]),
    /// A line went past the bound: it is reported once, as soon as it does, and the rest of it is
    /// skipped.
    TooLong,
}

/// Reads `input` line by line, never holding more than `max` bytes of a line, until the end of
/// input, a read error, or `each` returns `false`. A last line without a newline still counts.
pub(crate) fn read_lines(
    mut input: impl BufRead,
    max: usize,
    mut each: impl FnMut(Event<'_>) -> bool,
) {
    let mut line = Vec::new();
    let mut skipping = false;
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if buf.is_empty() {
            if !skipping && !line.is_empty() {
                each(Event::Line(&line));
            }
            return;
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        let used = chunk.len() + usize::from(newline.is_some());
        let mut keep_going = true;
        if !skipping {
            if line.len() + chunk.len() > max {
                skipping = true;
                line = Vec::new();
                keep_going = each(Event::TooLong);
            } else {
                line.extend_from_slice(chunk);
            }
        }
        input.consume(used);
        if !keep_going {
            return;
        }
        if newline.is_some() {
            if !skipping && !each(Event::Line(&line)) {
                return;
            }
            line.clear();
            skipping = false;
        }
    }
}

/// What the writer thread is asked to do.
enum Out {
    /// Write this line.
    Line(String),
    /// Stop after the lines before this one.
    Finish,
}

/// The stdio [`Transport`] given to `rmcp`: messages the reader thread accepted come in through a
/// channel, and answers go out through the writer thread, the only writer of stdout, so that
/// this layer's error lines and `rmcp`'s responses never interleave within a line.
pub(crate) struct LineTransport {
    incoming: tokio::sync::mpsc::Receiver<ClientJsonRpcMessage>,
    out: std::sync::mpsc::Sender<Out>,
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sent = serde_json::to_string(&item)
            .map_err(std::io::Error::from)
            .and_then(|line| {
                self.out
                    .send(Out::Line(line))
                    .map_err(|_| std::io::ErrorKind::BrokenPipe.into())
            });
        std::future::ready(sent)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

/// The threads behind a [`LineTransport`]; [`Stdio::finish`] flushes what was answered.
pub(crate) struct Stdio {
    out: std::sync::mpsc::Sender<Out>,
    writer: std::thread::JoinHandle<()>,
}

impl Stdio {
    /// Waits until every line answered so far is written. The reader thread is left alone: it
    /// ends with stdin, or with the process.
    pub(crate) fn finish(self) {
        let _ = self.out.send(Out::Finish);
        let _ = self.writer.join();
    }
}

/// Starts the reader and writer threads on stdin and stdout.
pub(crate) fn start() -> (LineTransport, Stdio) {
    let (out, lines) = std::sync::mpsc::channel::<Out>();
    let writer = std::thread::spawn(move || {
        let mut stdout = std::io::stdout().lock();
        while let Ok(Out::Line(line)) = lines.recv() {
            if writeln!(stdout, "{line}")
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return;
            }
        }
    });
    // A small queue: a client that floods the server waits on its pipe instead of on our memory.
    let (accepted, incoming) = tokio::sync::mpsc::channel(16);
    let replies = out.clone();
    std::thread::spawn(move || {
        read_lines(std::io::stdin().lock(), MAX_LINE_BYTES, |event| {
            let reply = match event {
                Event::TooLong => too_long(),
                Event::Line(line) => match classify(line) {
                    Line::Message(m) => return accepted.blocking_send(*m).is_ok(),
                    Line::Reply(v) => v,
                    Line::Skip => return true,
                },
            };
            replies.send(Out::Line(reply.to_string())).is_ok()
        });
    });
    (
        LineTransport {
            incoming,
            out: out.clone(),
        },
        Stdio { out, writer },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a line comes to, in short: `msg` for a message passed on, `skip`, or the error code
    /// and id of the reply.
    fn check(input: &[u8], expected: &str) {
        let got = match classify(input) {
            Line::Message(_) => "msg".to_owned(),
            Line::Skip => "skip".to_owned(),
            Line::Reply(v) => format!("{} {}", v["error"]["code"], v["id"]),
        };
        assert_eq!(got, expected, "{}", String::from_utf8_lossy(input));
    }

    const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call""#;

    #[test]
    fn unparsable_lines_get_a_parse_error_with_a_null_id() {
        check(b"{", "-32700 null");
        check(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"",
            "-32700 null",
        );
        check(b"\xff\xfe{}", "-32700 null");
        check(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\xc3\"}",
            "-32700 null",
        );
        check(
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\ud800"}}"#,
            "-32700 null",
        );
        check(&[b'['; 100_000], "-32700 null");
        check(&[b'['; 129], "-32700 null");
    }

    #[test]
    fn json_that_is_not_a_request_gets_invalid_request() {
        check(b"5", "-32600 null");
        // Unstructured params make a request invalid; only a served method's are "Invalid params".
        check(
            br#"{"jsonrpc":"2.0","id":1,"method":"nope/x","params":5}"#,
            "-32600 1",
        );
        check(b"[]", "-32600 null");
        check(br#"{"jsonrpc":"2.0","id":3}"#, "-32600 3");
        check(
            br#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
            "-32600 \"a\"",
        );
        check(
            br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            "-32600 null",
        );
    }

    #[test]
    fn wrong_params_shapes_get_invalid_params_with_the_id() {
        for params in [
            r#","params":5}"#,
            r#","params":[]}"#,
            r#","params":"x"}"#,
            r#","params":{"name":"repo_search","arguments":"x"}}"#,
            r#","params":{"name":"repo_search","arguments":[1]}}"#,
            r#","params":{"arguments":{}}}"#,
            r#","params":{"name":5}}"#,
            "}",
        ] {
            check(format!("{CALL}{params}").as_bytes(), "-32602 7");
        }
        check(
            br#"{"jsonrpc":"2.0","id":"s","method":"tools/list","params":5}"#,
            "-32602 \"s\"",
        );
        check(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            "-32602 1",
        );
    }

    #[test]
    fn valid_messages_pass_through() {
        check(
            format!(r#"{CALL},"params":{{"name":"repo_search","arguments":{{"query":"x"}}}}}}"#)
                .as_bytes(),
            "msg",
        );
        check(
            format!(r#"{CALL},"params":{{"name":"other"}}}}"#).as_bytes(),
            "msg",
        );
        check(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, "msg");
        check(
            b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r",
            "msg",
        );
        check(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "msg",
        );
        // An unknown method is rmcp's to refuse, with "method not found".
        check(br#"{"jsonrpc":"2.0","id":1,"method":"nope/x"}"#, "msg");
    }

    #[test]
    fn blank_lines_and_unreadable_notifications_get_no_reply() {
        check(b"", "skip");
        check(b" \t\r", "skip");
        check(br#"{"jsonrpc":"1.0","method":"notifications/x"}"#, "skip");
    }

    fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut got = Vec::new();
        read_lines(std::io::BufReader::with_capacity(3, input), max, |e| {
            got.push(match e {
                Event::Line(l) => String::from_utf8_lossy(l).into_owned(),
                Event::TooLong => "<too long>".to_owned(),
            });
            true
        });
        got
    }

    #[test]
    fn an_over_long_line_is_reported_once_and_the_next_line_is_read() {
        assert_eq!(
            lines(b"abc\n0123456789\nde\n\nlast", 5),
            ["abc", "<too long>", "de", "", "last"]
        );
        assert_eq!(lines(b"12345\n123456\n1", 5), ["12345", "<too long>", "1"]);
        assert_eq!(lines(b"123456789", 5), ["<too long>"]);
        assert_eq!(lines(b"", 5), Vec::<String>::new());
    }
}
