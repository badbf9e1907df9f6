//! `repo-search serve`: a watching host on a Unix socket, and the client `search` uses.
//!
//! The server owns one index directory: it holds an exclusive OS lock on `serve.lock` there for
//! its lifetime and listens on `serve.sock` next to it (mode 0600).
//!
//! **The socket is an untrusted backend.** The client does not print what the server says: it
//! runs its own tool and facade over a backend that relays the index's `status` and
//! `search` to the server, so every served answer passes the client's own freshness and trust
//! gates (paths, scope, scores, caps, provenance) exactly as an index answer does, and a forged
//! reply is refused with the `UNTRUSTED` code. The client also checks the server's credentials
//! (`SO_PEERCRED`: its own uid, or root), and the server the client's.
//!
//! **The protocol**, one JSON object per line:
//! - on accept the server sends `{"hello": {"protocol": 2, "root": …, "modes": […]}}`;
//! - the client sends `{"refresh": {"mode": …}}` (bring the index up to date, as a one-shot
//!   `search` does before it answers), `{"status": {}}` or `{"search": <SearchRequest>}`;
//! - while it works the server sends `{"working": true}` every [`HEARTBEAT`], then `{"ok": …}`
//!   (nothing, the index's status, or the backend's response) or `{"error": {"code": …}}`.
//!
//! **A server that does not answer costs little.** The client gives up when the hello does not
//! come within [`HANDSHAKE_TIMEOUT`], or when no line comes for [`IDLE_TIMEOUT`] (a stopped or
//! wedged server), and then answers by itself: the same mode and the same answer, so it is not a
//! fallback that changes meaning. It also answers by itself when no server listens, when the
//! server serves another worktree or speaks another protocol, and when its credentials are not
//! trusted. The client never starts a server: that is the front end's choice (the CLI starts one
//! in the background after a search on a large index, with [`ServeConfig::idle_timeout`] set and
//! its report in [`open_log`]'s file).
//!
//! **Deep paths.** A socket path is limited to 107 bytes (`sun_path`). When the socket's path is
//! longer, both sides reach it through `/proc/self/fd/<fd of the index directory>/serve.sock`
//! (Linux), which always fits, so `serve` works in a worktree of any depth.

use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use index_contract::{
    BackendCapabilities, BackendError, BackendSearchResponse, BoxFuture, ErrorCode, IndexStatus,
    RemoveRequest, RepositoryIndexBackend, SearchMode, SearchRequest, UpdateRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};

use crate::{Host, HostError};

/// The socket's name in the index directory.
pub const SOCKET: &str = "serve.sock";

/// The lock file's name in the index directory: whoever holds its lock is the server.
const LOCK: &str = "serve.lock";

/// The log's name in the index directory: a server that a `search` started in the background
/// reports there ([`open_log`]).
pub const LOG: &str = "serve.log";

/// A log longer than this is emptied before a server appends to it, so that servers started
/// over months keep it small.
const MAX_LOG: u64 = 1 << 20;

/// The protocol this build speaks; a hello with another is no server.
const PROTOCOL: u64 = 2;

/// A request line longer than this is refused: no valid request comes near it.
const MAX_REQUEST: u64 = 1 << 20;

/// A reply line longer than this is not read: the tool's caps keep real answers far below it.
const MAX_REPLY: u64 = 64 << 20;

/// The longest socket path `bind` and `connect` take, without its NUL (`sun_path` is 108 bytes).
const MAX_SOCKET_PATH: usize = 107;

/// How long a client waits to connect. A live server accepts at once.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(50);

/// How long a client waits for the server's hello after connecting. A live server sends it as it
/// accepts; a stopped one never does.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(300);

/// How often a working server tells its client it is alive (well inside [`IDLE_TIMEOUT`]).
pub const HEARTBEAT: Duration = Duration::from_millis(100);

/// How long a client waits for any line (a heartbeat or the reply) before it takes the server
/// for gone and answers by itself.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(1);

/// How often the server checks that its worktree, index directory and socket are still there.
const WATCHDOG_PERIOD: Duration = Duration::from_millis(500);

/// How long a starting server waits for the lock while it may only be asked about
/// ([`serving_pid`] holds it for microseconds) before it says another server holds it.
const LOCK_QUESTION_GRACE: Duration = Duration::from_secs(1);

/// How often a starting server tries the lock again within [`LOCK_QUESTION_GRACE`].
const LOCK_RETRY: Duration = Duration::from_millis(10);

/// How long the server waits after a failed `accept` before it accepts again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

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

/// What the server says first.
#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    protocol: u64,
    root: PathBuf,
    modes: Vec<SearchMode>,
    /// What `semantic` is served with ([`crate::SemanticConfig::setup`]), when it is.
    #[serde(default)]
    semantic: Option<String>,
}

/// One request line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Request {
    /// Bring the index up to date for `mode`, as a one-shot `search` does first.
    Refresh { mode: SearchMode },
    /// The index's status.
    Status {},
    /// A backend query, as the client's facade built it.
    Search(Box<SearchRequest>),
}

/// Whether the process on the other end of the socket is trusted: see [`trusted_uid`].
fn trusted_peer(stream: &UnixStream) -> bool {
    let me = rustix::process::geteuid().as_raw();
    stream
        .peer_cred()
        .is_ok_and(|cred| trusted_uid(cred.uid(), me))
}

/// A peer is trusted when it runs as this user, or as root (who could read the index anyway).
/// Another user who can reach the socket (a shared `--index-dir`) is neither asked nor answered.
fn trusted_uid(peer: u32, me: u32) -> bool {
    peer == me || peer == 0
}

/// The path to bind or connect for `dir/serve.sock`: the path itself when it fits in
/// `sun_path`, else (Linux) the same file through `/proc/self/fd/<dir_fd>`. `dir_fd` must stay
/// open while the path is used.
fn socket_address(dir: &Path, dir_fd: &File) -> PathBuf {
    let direct = dir.join(SOCKET);
    if direct.as_os_str().len() <= MAX_SOCKET_PATH || !cfg!(target_os = "linux") {
        return direct;
    }
    PathBuf::from(format!("/proc/self/fd/{}/{SOCKET}", dir_fd.as_raw_fd()))
}

/// What a server reports as it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeEvent {
    /// It listens on `socket` for the worktree at `root`.
    Serving {
        /// The worktree's canonical root.
        root: PathBuf,
        /// The socket's path.
        socket: PathBuf,
    },
    /// It stopped, for the reason given, after answering `searches` searches.
    Stopped {
        /// Why: the reason `shutdown` gave, or that its worktree, index directory or socket
        /// went away.
        why: &'static str,
        /// Searches answered.
        searches: u64,
    },
}

/// How a server runs, beyond its host: see [`serve`].
#[derive(Debug, Clone, Default)]
pub struct ServeConfig {
    /// Stop once no client has been connected for this long. `None`: stop only on `shutdown`
    /// or when the worktree, the index directory or the socket goes away. A server that a
    /// `search` started has one, so that it leaves nothing running once its worktree is no
    /// longer searched.
    pub idle_timeout: Option<Duration>,
}

/// Serves `host` (a watching host on the embedded index) on its index directory's socket until
/// `shutdown` completes (with the reason to report), until the worktree, the index directory
/// or the socket goes away, or until no client has been connected for `config`'s idle timeout.
/// `events` hears when it listens and when it stops.
///
/// # Cancellation
///
/// Dropping the future stops the server without removing its socket, which the next server
/// replaces (the lock dies with the process).
pub async fn serve(
    host: Host,
    config: ServeConfig,
    shutdown: impl Future<Output = &'static str>,
    mut events: impl FnMut(ServeEvent),
) -> Result<(), HostError> {
    let index_dir = host
        .index_dir()
        .map(Path::to_path_buf)
        .ok_or(HostError::IndexDirUnusable)?;
    let backend = host.embedded_backend().ok_or(HostError::IndexUnopenable)?;
    let lock = search_profile::open_or_create_regular(&index_dir.join(LOCK))
        .map_err(|_| HostError::ServeUnavailable)?;
    // `status` and a search that may start a server ask whether one holds the lock by taking
    // it for an instant ([`serving_pid`]), so a lock held now may be such a question: a server
    // is refused only when the lock stays held past a grace that outlasts any of them.
    let asked_until = Instant::now() + LOCK_QUESTION_GRACE;
    loop {
        match lock.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < asked_until => {
                tokio::time::sleep(LOCK_RETRY).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => return Err(HostError::ServerRunning),
            Err(std::fs::TryLockError::Error(_)) => return Err(HostError::ServeUnavailable),
        }
    }
    // The lock file names its holder, for `status` ([`serving_pid`]); a server that cannot
    // write it still serves.
    let _ = (|| -> std::io::Result<()> {
        use std::io::Write as _;
        lock.set_len(0)?;
        (&lock).write_all(format!("{}\n", std::process::id()).as_bytes())
    })();
    // The first refresh walks the selection and arms the watcher, so that the first client does
    // not pay for it. A failure here is the first query's to report, not the server's.
    let _ = host.refresh(SearchMode::IndexedLiteral).await;
    let socket = index_dir.join(SOCKET);
    let listener = bind_private(&index_dir).map_err(|_| HostError::ServeUnavailable)?;
    let root = host.root().to_path_buf();
    let watched = [
        (root.clone(), Identity::of(&root)),
        (index_dir.clone(), Identity::of(&index_dir)),
        (socket.clone(), Identity::of(&socket)),
    ];
    let bound = watched[2].1;
    events(ServeEvent::Serving {
        root: root.clone(),
        socket: socket.clone(),
    });
    let hello = json!({ "hello": Hello {
        protocol: PROTOCOL,
        root,
        modes: host.tool().modes().to_vec(),
        semantic: host.semantic_setup().map(str::to_owned),
    } })
    .to_string();
    let server = Arc::new(Served {
        host,
        backend,
        hello,
        searches: AtomicU64::new(0),
        activity: Activity::new(),
    });
    let mut watchdog = tokio::time::interval(WATCHDOG_PERIOD);
    tokio::pin!(shutdown);
    let why = loop {
        tokio::select! {
            // A client waiting to be accepted is served before the watchdog may stop the server.
            biased;
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    if trusted_peer(&stream) {
                        // Counted open here, before the task runs, so that the watchdog never
                        // takes a server with a client just accepted for idle.
                        let open = Open::new(server.clone());
                        tokio::spawn(async move { open.0.clone().connection(stream).await });
                    }
                }
                // An error that lasts (no descriptor left while a client waits) would make
                // `accept` ready again at once, and the biased loop would spin and never reach
                // the watchdog: pause before accepting again.
                Err(_) => tokio::time::sleep(ACCEPT_ERROR_PAUSE).await,
            },
            why = &mut shutdown => break why,
            _ = watchdog.tick() => {
                if watched.iter().any(|(path, id)| id.is_none() || Identity::of(path) != *id) {
                    break "because its worktree, index directory or socket went away";
                }
                if config
                    .idle_timeout
                    .is_some_and(|limit| server.activity.idle_for().is_some_and(|idle| idle >= limit))
                {
                    break "because no client came for its idle timeout";
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
    events(ServeEvent::Stopped {
        why,
        searches: server.searches.load(Ordering::Relaxed),
    });
    Ok(())
}

/// Whether a server holds `index_dir`'s lock (one serves the index, or is starting to), and its
/// pid when the lock file names one: `None` when no server holds it (or there is no lock file),
/// `Some(None)` when one holds it without naming itself (a build that did not write its pid).
/// Asking takes the lock for an instant when it is free.
pub fn serving_pid(index_dir: &Path) -> Option<Option<u32>> {
    let lock = search_profile::open_regular(&index_dir.join(LOCK)).ok()?;
    if matches!(lock.try_lock(), Ok(())) {
        return None;
    }
    // Untrusted like every file: a few bytes at most, a decimal pid, or nothing is named.
    let text = search_profile::read_bounded(&lock, 32).ok();
    Some(text.and_then(|t| std::str::from_utf8(&t).ok()?.trim().parse().ok()))
}

/// Opens `index_dir/serve.log` for appending, for a server with no terminal to report to: a
/// regular file only, no symlink followed, emptied first when it has grown past 1 MiB.
pub fn open_log(index_dir: &Path) -> std::io::Result<File> {
    let log = search_profile::open_or_create_appending(&index_dir.join(LOG))?;
    if log.metadata()?.len() > MAX_LOG {
        log.set_len(0)?;
    }
    Ok(log)
}

/// Listens on `index_dir/serve.sock` with mode 0600 from the first instant: the socket is bound
/// in a private directory (0700), given its mode, then renamed into place, replacing a stale
/// socket left by a killed server (the caller holds the lock, so no live server owns it).
fn bind_private(index_dir: &Path) -> std::io::Result<UnixListener> {
    let private = index_dir.join(format!("serve-{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let bound = (|| {
        let dir = File::open(&private)?;
        let listener = UnixListener::bind(socket_address(&private, &dir))?;
        let path = private.join(SOCKET);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        let socket = index_dir.join(SOCKET);
        match std::fs::remove_file(&socket) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::rename(&path, &socket)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&private);
    bound
}

/// The server's side of every connection.
struct Served {
    host: Host,
    /// The host's index backend, which a `search` request queries.
    backend: Arc<dyn RepositoryIndexBackend>,
    /// The hello line.
    hello: String,
    /// Searches answered, for the exit report.
    searches: AtomicU64,
    /// Open connections and when the last one opened or closed, for the idle timeout.
    activity: Activity,
}

/// When the server last had a client, for [`ServeConfig::idle_timeout`].
struct Activity {
    /// What `last` counts from.
    start: Instant,
    /// Connections open now.
    open: AtomicU64,
    /// Milliseconds from `start` to the last connection's opening or closing.
    last: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            start: Instant::now(),
            open: AtomicU64::new(0),
            last: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.fetch_max(now, Ordering::SeqCst);
    }

    /// How long no connection has been open; `None` while one is.
    fn idle_for(&self) -> Option<Duration> {
        if self.open.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last.load(Ordering::SeqCst));
        Some(self.start.elapsed().saturating_sub(last))
    }
}

/// One open connection of a server, counted in its [`Activity`] from creation to drop.
struct Open(Arc<Served>);

impl Open {
    fn new(server: Arc<Served>) -> Open {
        server.activity.open.fetch_add(1, Ordering::SeqCst);
        server.activity.touch();
        Open(server)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        // The time first: a watchdog that sees no connection open sees this one's close too.
        self.0.activity.touch();
        self.0.activity.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Served {
    /// Answers one connection's requests, in order, until it closes or sends a line too long.
    async fn connection(self: Arc<Served>, stream: UnixStream) {
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        if send(&mut write, &self.hello).await.is_err() {
            return;
        }
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
                refused()
            } else {
                match serde_json::from_slice::<Request>(&line) {
                    Ok(request) => {
                        let work = self.answer(request);
                        tokio::pin!(work);
                        // The first beat is due one period from now: an interval's immediate
                        // first tick still waits for the timer wheel's next millisecond, which
                        // every request would pay.
                        let mut beat = tokio::time::interval_at(
                            tokio::time::Instant::now() + HEARTBEAT,
                            HEARTBEAT,
                        );
                        loop {
                            tokio::select! {
                                biased;
                                reply = &mut work => break reply,
                                _ = beat.tick() => {
                                    if send(&mut write, r#"{"working":true}"#).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    }
                    Err(_) => refused(),
                }
            };
            if send(&mut write, &reply.to_string()).await.is_err() || too_long {
                // The rest of an overlong line cannot be told from the next request.
                return;
            }
        }
    }

    /// The reply to one request.
    async fn answer(&self, request: Request) -> Value {
        match request {
            Request::Refresh { mode } => match self.host.refresh(mode).await {
                Ok(_) => json!({ "ok": null }),
                Err(e) => error(e.code()),
            },
            Request::Status {} => match self.backend.status().await {
                Ok(status) => json!({ "ok": status }),
                Err(_) => error(ErrorCode::Failed),
            },
            Request::Search(request) => {
                let answer = self.backend.search(*request).await;
                self.searches.fetch_add(1, Ordering::Relaxed);
                match answer {
                    Ok(response) => json!({ "ok": response }),
                    Err(_) => error(ErrorCode::Failed),
                }
            }
        }
    }
}

fn error(code: ErrorCode) -> Value {
    json!({ "error": { "code": code.as_str() } })
}

/// The reply to a line that is not a request.
fn refused() -> Value {
    json!({ "error": {
        "code": ErrorCode::Unsupported.as_str(),
        "message": "the request is not one line of JSON of the serve protocol (`refresh`, \
                    `status` or `search`), under 1 MiB",
    } })
}

async fn send(write: &mut OwnedWriteHalf, line: &str) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    write.write_all(&bytes).await
}

/// What the server answered, as the client reads it.
#[derive(Debug, PartialEq)]
enum Reply {
    /// `{"ok": …}`.
    Ok(Value),
    /// `{"error": {"code": …}}`: a code, and nothing of the server's words.
    Error(ErrorCode),
}

/// The client's connection: one request at a time.
struct Connection {
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
}

/// The index of a running `repo-search serve`, as a backend of the client's own facade: the
/// server's answers are untrusted, and the facade's gates judge them as any backend's.
pub(crate) struct ServedBackend {
    /// `None` once the server is gone, or a request was abandoned mid-reply.
    connection: tokio::sync::Mutex<Option<Connection>>,
    /// The server stopped answering, or said something that is not a reply.
    gone: AtomicBool,
    /// Whether the server offered `semantic`, with the setup the client asked for.
    semantic: bool,
    /// The longest one exchange may take, heartbeats or not: a server that only ever says it is
    /// working is gone too.
    patience: Duration,
    /// The status the server gave right after the last refresh, sent with it: the facade asks
    /// for the status next, and takes this one instead of another round trip. Kept for that one
    /// call only.
    status_after_refresh: std::sync::Mutex<Option<Reply>>,
}

impl ServedBackend {
    /// Whether the server stopped answering: the caller then answers by itself.
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }

    /// The modes this backend serves beside `literal`.
    pub(crate) fn modes(&self) -> Vec<SearchMode> {
        let mut modes = vec![SearchMode::Literal, SearchMode::IndexedLiteral];
        if self.semantic {
            modes.push(SearchMode::Semantic);
        }
        modes
    }

    /// Sends one request and reads its reply; `None` when the server is gone (and from then
    /// on). Abandoning the future mid-reply leaves the connection unusable, so it is dropped.
    async fn exchange(&self, request: &Request) -> Option<Reply> {
        self.exchange_all([request]).await.map(|[reply]| reply)
    }

    /// [`ServedBackend::exchange`] of `N` requests sent at once, their replies in order: one
    /// round trip. `None` when the server is gone (and from then on).
    async fn exchange_all<const N: usize>(&self, requests: [&Request; N]) -> Option<[Reply; N]> {
        let mut guard = self.connection.lock().await;
        let mut connection = guard.take()?;
        let replies = tokio::time::timeout(self.patience, exchange_all(&mut connection, requests))
            .await
            .ok()
            .flatten();
        if replies.is_some() {
            *guard = Some(connection);
        } else {
            self.gone.store(true, Ordering::SeqCst);
        }
        replies
    }

    /// Asks the server to bring the index up to date for `mode`: `Err` with the refresh's code,
    /// or with `None` when the server is gone. The status is asked for in the same round trip:
    /// the server answers a connection's requests in order, so it is the status a request sent
    /// after the refresh's reply would get, and the facade asks for it next.
    pub(crate) async fn refresh(&self, mode: SearchMode) -> Result<(), Option<ErrorCode>> {
        self.take_status_after_refresh();
        let replies = self
            .exchange_all([&Request::Refresh { mode }, &Request::Status {}])
            .await;
        match replies {
            Some([Reply::Ok(Value::Null), status]) => {
                *self
                    .status_after_refresh
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(status);
                Ok(())
            }
            Some([Reply::Error(code), _]) => Err(Some(code)),
            Some([Reply::Ok(_), _]) => {
                self.gone.store(true, Ordering::SeqCst);
                Err(None)
            }
            None => Err(None),
        }
    }

    /// The status sent with the last refresh, if no call has taken it yet.
    fn take_status_after_refresh(&self) -> Option<Reply> {
        self.status_after_refresh
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// A reply's `ok` value as `T`; a reply of another shape makes the server gone.
    fn read<T: serde::de::DeserializeOwned>(
        &self,
        reply: Option<Reply>,
    ) -> Result<T, BackendError> {
        match reply {
            Some(Reply::Ok(v)) => serde_json::from_value(v).map_err(|_| {
                // Not a reply of this protocol: a forgery or another program. Its words are not
                // reported; the facade says FAILED, and the caller answers by itself.
                self.gone.store(true, Ordering::SeqCst);
                BackendError::from("the served reply is not a backend answer")
            }),
            Some(Reply::Error(_)) => Err(BackendError::from("the server failed")),
            None => Err(BackendError::from("the server is gone")),
        }
    }
}

impl RepositoryIndexBackend for ServedBackend {
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities {
            semantic: self.semantic,
            ..embedded_index::EmbeddedIndex::declared_capabilities()
        }
    }

    fn update(&self, _: UpdateRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async {
            Err(BackendError::from(
                "a served index is updated by its server",
            ))
        })
    }

    fn remove(&self, _: RemoveRequest) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async {
            Err(BackendError::from(
                "a served index is updated by its server",
            ))
        })
    }

    fn search(
        &self,
        request: SearchRequest,
    ) -> BoxFuture<'_, Result<BackendSearchResponse, BackendError>> {
        Box::pin(async move {
            self.take_status_after_refresh();
            let reply = self.exchange(&Request::Search(Box::new(request))).await;
            self.read(reply)
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<IndexStatus, BackendError>> {
        Box::pin(async move {
            let reply = match self.take_status_after_refresh() {
                Some(reply) => Some(reply),
                None => self.exchange(&Request::Status {}).await,
            };
            self.read(reply)
        })
    }

    fn dispose(&self) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Sends `requests` in one write, then reads lines until a reply to each, in order: `None` when
/// the server is gone (the connection closed, no line within [`IDLE_TIMEOUT`], a line over
/// [`MAX_REPLY`], or a line that is neither a heartbeat nor a reply).
async fn exchange_all<const N: usize>(
    connection: &mut Connection,
    requests: [&Request; N],
) -> Option<[Reply; N]> {
    let lines = requests
        .iter()
        .map(|r| serde_json::to_string(r).ok())
        .collect::<Option<Vec<String>>>()?
        .join("\n");
    tokio::time::timeout(IDLE_TIMEOUT, send(&mut connection.write, &lines))
        .await
        .ok()?
        .ok()?;
    let mut replies = Vec::with_capacity(N);
    while replies.len() < N {
        let line = read_line(&mut connection.read, IDLE_TIMEOUT).await?;
        match read_reply(&line)? {
            Line::Working => continue,
            Line::Reply(reply) => replies.push(reply),
        }
    }
    replies.try_into().ok()
}

/// Reads one line within `timeout`; `None` at the end, on an error, past the bound, or late.
async fn read_line(read: &mut BufReader<OwnedReadHalf>, timeout: Duration) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    tokio::time::timeout(
        timeout,
        (&mut *read).take(MAX_REPLY).read_until(b'\n', &mut line),
    )
    .await
    .ok()?
    .ok()?;
    // Cut short: the server went away mid-line, or the line is over the bound.
    (line.last() == Some(&b'\n')).then_some(line)
}

/// A line from the server.
#[derive(Debug, PartialEq)]
enum Line {
    Working,
    Reply(Reply),
}

/// A line as the client reads it; `None` when it is none of the protocol's.
fn read_reply(line: &[u8]) -> Option<Line> {
    let mut reply: serde_json::Map<String, Value> = serde_json::from_slice(line).ok()?;
    if reply.len() != 1 {
        return None;
    }
    if reply.get("working") == Some(&Value::Bool(true)) {
        return Some(Line::Working);
    }
    if let Some(ok) = reply.remove("ok") {
        return Some(Line::Reply(Reply::Ok(ok)));
    }
    let code = reply.remove("error")?.get("code")?.as_str()?.to_owned();
    let code = ErrorCode::ALL.into_iter().find(|c| c.as_str() == code)?;
    Some(Line::Reply(Reply::Error(code)))
}

/// Connects to the server of the index a host for `root` would use, if one runs for this
/// worktree and answers the handshake in time: a host on the server's index, whose answers pass
/// its own gates ([`Host::server_gone`] says when it stopped answering), or `None`, and the caller answers by itself. Any error
/// here is the one-shot path's to report, in its own words. One exchange may take twice
/// `deadline` (a refresh may wait that long for another writer before the search runs). The
/// server serves `semantic` to this client only when it serves it with `semantic_setup`, the
/// client's own ([`crate::SemanticConfig::setup`]): the same model and re-rank policy.
pub async fn connect(
    root: &Path,
    index_dir: Option<&Path>,
    deadline: Duration,
    semantic_setup: Option<&str>,
) -> Option<Host> {
    let (root, index_dir) = crate::locate::locate(root, index_dir).ok()?;
    let dir = File::open(&index_dir).ok()?;
    let address = socket_address(&index_dir, &dir);
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, UnixStream::connect(address))
        .await
        .ok()?
        .ok()?;
    drop(dir);
    if !trusted_peer(&stream) {
        return None;
    }
    let (read, write) = stream.into_split();
    let mut read = BufReader::new(read);
    let line = read_line(&mut read, HANDSHAKE_TIMEOUT).await?;
    let hello: Hello = serde_json::from_slice::<Value>(&line)
        .ok()
        .and_then(|mut v| serde_json::from_value(v.get_mut("hello")?.take()).ok())?;
    if hello.protocol != PROTOCOL || hello.root != root {
        return None;
    }
    let backend = Arc::new(ServedBackend {
        connection: tokio::sync::Mutex::new(Some(Connection { read, write })),
        gone: AtomicBool::new(false),
        semantic: hello.modes.contains(&SearchMode::Semantic)
            && semantic_setup.is_some()
            && hello.semantic.as_deref() == semantic_setup,
        patience: deadline.saturating_mul(2),
        status_after_refresh: std::sync::Mutex::new(None),
    });
    Host::on_server(root, backend, deadline).ok()
}

#[cfg(test)]
mod tests {
    use super::{Connection, Line, Reply, Request, exchange_all, read_reply, trusted_uid};
    use index_contract::SearchMode;
    use serde_json::{Value, json};
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::UnixStream;

    /// The refresh and the status a served search asks for go out together: the server reads
    /// both before it has answered either (a client that waited for the first reply would leave
    /// it waiting, and this test would time out), and the replies come back in order, heartbeats
    /// skipped.
    #[tokio::test]
    async fn requests_sent_together_take_one_round_trip_and_are_answered_in_order() {
        let (client, server) = UnixStream::pair().unwrap();
        let (read, write) = client.into_split();
        let mut connection = Connection {
            read: BufReader::new(read),
            write,
        };
        let server = tokio::spawn(async move {
            let (read, mut write) = server.into_split();
            let mut read = BufReader::new(read);
            let mut lines = [String::new(), String::new()];
            for line in &mut lines {
                tokio::time::timeout(Duration::from_secs(5), read.read_line(line))
                    .await
                    .expect("both requests arrive before any reply")
                    .unwrap();
            }
            write
                .write_all(b"{\"working\":true}\n{\"ok\":null}\n{\"ok\":{\"state\":\"ready\"}}\n")
                .await
                .unwrap();
            lines
        });
        let replies = exchange_all(
            &mut connection,
            [
                &Request::Refresh {
                    mode: SearchMode::IndexedLiteral,
                },
                &Request::Status {},
            ],
        )
        .await;
        let [first, second] = server.await.unwrap();
        assert!(
            first.starts_with("{\"refresh\"") && first.ends_with('\n'),
            "{first}"
        );
        assert_eq!(second, "{\"status\":{}}\n");
        assert_eq!(
            replies,
            Some([Reply::Ok(Value::Null), Reply::Ok(json!({"state": "ready"}))])
        );
    }

    /// A served search's status is the one that came with its refresh: the backend asks the
    /// server nothing more for it, and a second status (no refresh before it) is asked for anew.
    #[tokio::test]
    async fn the_status_after_a_refresh_costs_no_exchange_of_its_own() {
        use index_contract::{IndexState, IndexStatus, RepositoryIndexBackend};
        let (client, server) = UnixStream::pair().unwrap();
        let (read, write) = client.into_split();
        let backend = super::ServedBackend {
            connection: tokio::sync::Mutex::new(Some(Connection {
                read: BufReader::new(read),
                write,
            })),
            gone: std::sync::atomic::AtomicBool::new(false),
            semantic: false,
            patience: Duration::from_secs(5),
            status_after_refresh: std::sync::Mutex::new(None),
        };
        let server = tokio::spawn(async move {
            let (read, mut write) = server.into_split();
            let mut read = BufReader::new(read);
            let mut requests = Vec::new();
            let mut line = String::new();
            while read.read_line(&mut line).await.unwrap() > 0 {
                let reply = if line.starts_with("{\"refresh\"") {
                    "{\"ok\":null}\n"
                } else {
                    "{\"ok\":{\"state\":\"ready\",\"source_revision\":\"r1\"}}\n"
                };
                write.write_all(reply.as_bytes()).await.unwrap();
                requests.push(std::mem::take(&mut line));
            }
            requests
        });
        backend
            .refresh(SearchMode::IndexedLiteral)
            .await
            .expect("refreshed");
        let mut expected = IndexStatus::new(IndexState::Ready);
        expected.source_revision = Some("r1".into());
        assert_eq!(backend.status().await.unwrap(), expected);
        assert_eq!(backend.status().await.unwrap(), expected);
        drop(backend);
        let requests = server.await.unwrap();
        let kinds: Vec<&str> = requests
            .iter()
            .map(|r| r.split('"').nth(1).unwrap_or(""))
            .collect();
        assert_eq!(kinds, ["refresh", "status", "status"]);
    }

    #[test]
    fn only_the_same_user_or_root_is_a_trusted_peer() {
        for (peer, me, trusted) in [
            (1000, 1000, true),
            (0, 1000, true),
            (0, 0, true),
            (1001, 1000, false),
            (1000, 0, false),
            (65534, 1000, false),
        ] {
            assert_eq!(trusted_uid(peer, me), trusted, "peer {peer}, me {me}");
        }
    }
    use index_contract::ErrorCode;

    fn check(line: &str, expected: Option<Line>) {
        assert_eq!(read_reply(line.as_bytes()), expected, "{line}");
    }

    #[test]
    fn a_line_the_client_cannot_read_means_no_server() {
        check(r#"{"working": true}"#, Some(Line::Working));
        check(
            r#"{"ok": {"hits": []}}"#,
            Some(Line::Reply(Reply::Ok(json!({ "hits": [] })))),
        );
        check(r#"{"ok": null}"#, Some(Line::Reply(Reply::Ok(json!(null)))));
        for code in ErrorCode::ALL {
            // The server's words are never read: only the code.
            let line = json!({ "error": { "code": code.as_str(), "message": "m" } }).to_string();
            check(&line, Some(Line::Reply(Reply::Error(code))));
        }
        for line in [
            "",
            "not json",
            "[]",
            "{}",
            r#"{"working": false}"#,
            r#"{"ok": {}, "error": {}}"#,
            r#"{"error": {"code": "ERR_SOMETHING_ELSE"}}"#,
            &json!({ "error": ErrorCode::Failed.as_str() }).to_string(),
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
            let Some(Line::Reply(Reply::Ok(got))) = read_reply(line.as_bytes()) else {
                panic!("{line}");
            };
            assert_eq!(
                got["score"].as_f64().unwrap().to_bits(),
                score.to_bits(),
                "{text}"
            );
        }
    }
}
