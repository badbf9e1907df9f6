//! `repo-search serve`: a watching host on a Unix socket, and the client `search` uses.
//!
//! The server owns one index directory: it holds an exclusive OS lock on `serve.lock` there for
//! its lifetime and listens on `serve.sock` next to it (mode 0600). Each connection sends one
//! JSON request per line, `{"arguments": {…}, "root": "…"}` (the tool's arguments; `root`, when
//! given, must be the server's worktree), and reads one JSON reply per line: `{"ok": <result>}`,
//! `{"error": {"code", "message"}}`, or `{"unserved": "…"}` for a request meant for another
//! worktree. Answers go through [`crate::answer`], so they pass the same refresh and freshness
//! gate as a one-shot `search`; the watcher only makes the refresh cheap.
//!
//! The client never starts a server. When none answers (no socket, refused, timed out, a reply it
//! cannot read, another worktree), `search` refreshes and answers by itself.

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use index_contract::limits::DEFAULT_DEADLINE_MS;
use index_contract::{SearchMode, WireError};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{SignalKind, signal};

use crate::failure::Failure;
use crate::host::{self, Host};

/// The socket's name in the index directory.
pub(crate) const SOCKET: &str = "serve.sock";

/// The lock file's name in the index directory: whoever holds its lock is the server.
const LOCK: &str = "serve.lock";

/// A request line longer than this is refused: no valid tool call comes near it.
const MAX_REQUEST: u64 = 1 << 20;

/// A reply line longer than this is not read: the tool's caps keep real results far below it.
const MAX_REPLY: u64 = 64 << 20;

/// How long a client waits to connect. A live server accepts at once; anything slower is treated
/// as no server, so a wedged one costs a one-shot search little.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(50);

/// How long a client waits for its reply before it answers by itself: twice the query deadline,
/// since a refresh may wait that long for another writer before the search itself runs.
const REPLY_TIMEOUT: Duration = Duration::from_millis(2 * DEFAULT_DEADLINE_MS);

/// How often the server checks that its worktree, index directory and socket are still there.
const WATCHDOG_PERIOD: Duration = Duration::from_millis(500);

/// A file's identity: replaced or deleted files and directories no longer match it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
}

impl Identity {
    /// The identity of what is at `path` now, links not followed.
    fn of(path: &Path) -> Option<Identity> {
        std::fs::symlink_metadata(path).ok().map(|m| Identity {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// One request line.
#[derive(Deserialize)]
struct Request {
    arguments: Value,
    #[serde(default)]
    root: Option<PathBuf>,
}

/// Serves `host` (a watching host) on its index directory's socket until SIGTERM or SIGINT, or
/// until the worktree, the index directory or the socket goes away.
pub(crate) async fn serve(host: Host) -> Result<(), Failure> {
    let index_dir = host.index_dir.clone().ok_or(Failure::IndexDirUnusable)?;
    let lock = search_profile::open_or_create_regular(&index_dir.join(LOCK))
        .map_err(|_| Failure::ServeUnavailable)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(Failure::ServerRunning),
        Err(std::fs::TryLockError::Error(_)) => return Err(Failure::ServeUnavailable),
    }
    let (mut terminate, mut interrupt) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => return Err(Failure::ServeUnavailable),
    };
    // The first refresh walks the selection and arms the watcher, so that the first client does
    // not pay for it. A failure here is the first query's to report, not the server's.
    let _ = host.refresh(SearchMode::IndexedLiteral).await;
    let socket = index_dir.join(SOCKET);
    let listener = bind_private(&index_dir, &socket).map_err(|_| Failure::ServeUnavailable)?;
    let watched = [
        (host.root.clone(), Identity::of(&host.root)),
        (index_dir.clone(), Identity::of(&index_dir)),
        (socket.clone(), Identity::of(&socket)),
    ];
    let bound = watched[2].1;
    eprintln!(
        "repo-search: serving {} on {}",
        host.root.display(),
        socket.display()
    );
    let host = Arc::new(host);
    let answered = Arc::new(AtomicU64::new(0));
    let mut watchdog = tokio::time::interval(WATCHDOG_PERIOD);
    let why = loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(connection(host.clone(), stream, answered.clone()));
                }
            }
            _ = terminate.recv() => break "on SIGTERM",
            _ = interrupt.recv() => break "on SIGINT",
            _ = watchdog.tick() => {
                if watched.iter().any(|(path, id)| id.is_none() || Identity::of(path) != *id) {
                    break "because its worktree, index directory or socket went away";
                }
            }
        }
    };
    // Remove the socket only while it is still the one bound here: a new server may already
    // listen in a re-created index directory at the same path.
    if bound.is_some() && Identity::of(&socket) == bound {
        let _ = std::fs::remove_file(&socket);
    }
    drop(lock);
    eprintln!(
        "repo-search: stopped {why} after answering {} requests",
        answered.load(Ordering::Relaxed)
    );
    Ok(())
}

/// Listens on `socket` with mode 0600 from the first instant: the socket is bound in a private
/// directory (0700), given its mode, then renamed into place, replacing a stale socket left by a
/// killed server (the caller holds the lock, so no live server owns it).
fn bind_private(index_dir: &Path, socket: &Path) -> std::io::Result<UnixListener> {
    let private = index_dir.join(format!("serve-{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let bound = (|| {
        let path = private.join(SOCKET);
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        match std::fs::remove_file(socket) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::rename(&path, socket)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&private);
    bound
}

/// Answers one connection's requests, in order, until it closes or sends a line too long.
async fn connection(host: Arc<Host>, stream: UnixStream, answered: Arc<AtomicU64>) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    loop {
        let mut line = Vec::new();
        match (&mut read)
            .take(MAX_REQUEST + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let too_long = line.len() as u64 > MAX_REQUEST;
        let reply = if too_long {
            json!({ "error": Failure::ServeRequest.to_json() })
        } else {
            reply_to(&host, &line).await
        };
        let mut bytes = reply.to_string().into_bytes();
        bytes.push(b'\n');
        let sent = write.write_all(&bytes).await.is_ok();
        if sent {
            answered.fetch_add(1, Ordering::Relaxed);
        }
        if !sent || too_long {
            // The rest of an overlong line cannot be told from the next request.
            return;
        }
    }
}

/// The reply to one request line.
async fn reply_to(host: &Host, line: &[u8]) -> Value {
    let Ok(request) = serde_json::from_slice::<Request>(line) else {
        return json!({ "error": Failure::ServeRequest.to_json() });
    };
    if request.root.is_some_and(|r| r != host.root) {
        return json!({ "unserved": "this server serves another worktree" });
    }
    match crate::answer(host, &request.arguments).await {
        Ok(result) => json!({ "ok": result }),
        Err(failure) => json!({ "error": failure.to_json() }),
    }
}

/// Asks the server of the index `search` would use, if one is running: `Some` with its answer
/// (a result, or the failure it answered with), `None` when no server answers, and the caller
/// then answers by itself.
pub(crate) async fn ask(
    root: &Path,
    index_dir: Option<&Path>,
    arguments: &Value,
) -> Option<Result<Value, Failure>> {
    // Any error here is the one-shot path's to report, in its own words.
    let (root, index_dir) = host::locate(root, index_dir).ok()?;
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, UnixStream::connect(index_dir.join(SOCKET)))
        .await
        .ok()?
        .ok()?;
    let request = json!({ "arguments": arguments, "root": root });
    tokio::time::timeout(REPLY_TIMEOUT, exchange(stream, &request))
        .await
        .ok()?
}

/// Sends one request and reads its reply.
async fn exchange(stream: UnixStream, request: &Value) -> Option<Result<Value, Failure>> {
    let (read, mut write) = stream.into_split();
    let mut bytes = request.to_string().into_bytes();
    bytes.push(b'\n');
    write.write_all(&bytes).await.ok()?;
    let mut line = Vec::new();
    BufReader::new(read)
        .take(MAX_REPLY)
        .read_until(b'\n', &mut line)
        .await
        .ok()?;
    if line.last() != Some(&b'\n') {
        // Cut short: the server went away mid-reply, or the reply is over the bound.
        return None;
    }
    read_reply(&line)
}

/// A reply line as the client's answer; `None` when it is neither a result nor an error.
fn read_reply(line: &[u8]) -> Option<Result<Value, Failure>> {
    let mut reply: serde_json::Map<String, Value> = serde_json::from_slice(line).ok()?;
    if reply.len() != 1 {
        return None;
    }
    if let Some(result) = reply.remove("ok") {
        return result.is_object().then_some(Ok(result));
    }
    // The server's failures (a refused call, a failed refresh) carry their code and fixed
    // message; as a tool error they print the same hint the one-shot path would.
    let error: WireError = serde_json::from_value(reply.remove("error")?).ok()?;
    Some(Err(Failure::Tool(error)))
}

#[cfg(test)]
mod tests {
    use super::read_reply;
    use crate::failure::Failure;
    use index_contract::{ErrorCode, WireError};
    use serde_json::json;

    /// `Some(Ok)` for a result, `Some(Err(code))` for an error, `None` to fall back.
    fn check(line: &str, expected: Option<Result<(), ErrorCode>>) {
        let got = read_reply(line.as_bytes()).map(|r| r.map(drop).map_err(|f| f.code()));
        assert_eq!(got, expected, "{line}");
    }

    #[test]
    fn a_reply_the_client_cannot_read_means_no_server() {
        check(r#"{"ok": {"hits": []}}"#, Some(Ok(())));
        for code in ErrorCode::ALL {
            let line = json!({ "error": { "code": code.as_str(), "message": "m" } }).to_string();
            check(&line, Some(Err(code)));
        }
        // An error without its message.
        let no_message = json!({ "error": { "code": ErrorCode::Failed.as_str() } }).to_string();
        for line in [
            "",
            "not json",
            "[]",
            "{}",
            r#"{"ok": 5}"#,
            r#"{"ok": {}, "error": {}}"#,
            r#"{"error": {"code": "ERR_SOMETHING_ELSE", "message": "m"}}"#,
            no_message.as_str(),
            r#"{"unserved": "this server serves another worktree"}"#,
        ] {
            check(line, None);
        }
    }

    #[test]
    fn a_served_score_is_the_very_number_the_server_printed() {
        // Without `float_roundtrip`, serde_json may parse a number one unit in the last place
        // away, and `search --json` then printed a different score through a server.
        for text in ["0.9725490196078431", "0.7725490196078431", "0.1", "1e-300"] {
            let score: f64 = text.parse().unwrap();
            let line = json!({ "ok": { "score": score } }).to_string();
            let got = read_reply(line.as_bytes()).unwrap().unwrap();
            assert_eq!(
                got["score"].as_f64().unwrap().to_bits(),
                score.to_bits(),
                "{text}"
            );
        }
    }

    #[test]
    fn a_served_error_keeps_its_code_and_message() {
        let wire = WireError {
            code: ErrorCode::Untrusted,
            message: "path scope refused".into(),
        };
        let line = json!({ "error": wire }).to_string();
        assert_eq!(
            read_reply(line.as_bytes()),
            Some(Err(Failure::Tool(wire.clone())))
        );
    }
}
