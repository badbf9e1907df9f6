//! `repo-search mcp`: the `repo_search` tool over MCP on stdio, with `rmcp`.
//!
//! Which worktree the tool searches:
//! - `--root DIR`: that worktree, whatever the client says.
//! - Otherwise, a client that declares the `roots` capability names them: with one root, the tool
//!   searches it; with several, the tool takes a required `root` argument whose `enum` lists them,
//!   and each root's host is opened on its first call. A `notifications/roots/list_changed` makes
//!   the server ask again, and tell the client that the tool changed.
//! - A client without roots (or whose `roots/list` fails, or lists none): the directory the server
//!   was started in, as with `--root .`.
//!
//! Errors are tool results with `isError: true` and the `{code, message}` object as their text
//! content, without `structuredContent`: a client validates structured content against the
//! tool's `outputSchema` (the TypeScript SDK does so for errors too), and an error is not an
//! answer (`docs/tool.md`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::sync::{Mutex, watch};

use crate::failure::Failure;
use repo_search_host::{Host, Refresh};

/// How long the server waits for the client's `roots/list` answer, and for a call to learn the
/// roots, before it serves the directory it was started in.
const ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

/// The argument that picks one of several client roots.
const ROOT_ARGUMENT: &str = "root";

/// Where the tool's worktrees come from.
enum Roots {
    /// `--root`: one host, opened before serving.
    Fixed(Arc<Host>),
    /// The client's roots, once known; hosts are opened on first use.
    Client(ClientRoots),
}

/// The roots a client named, and the hosts opened for them.
struct ClientRoots {
    /// How to open a host for a directory: `--index-dir`, the model and the rest of the command
    /// line, with the directory as its root.
    open: OpenHost,
    /// The roots' directories in the client's order; `None` until known.
    known: watch::Sender<Option<Arc<Vec<PathBuf>>>>,
    /// Hosts by the directory they were opened for. A failure is kept too, so that a root that
    /// is not a worktree answers every call with the same error without trying again.
    hosts: Mutex<HashMap<PathBuf, Result<Arc<Host>, Failure>>>,
}

impl ClientRoots {
    /// The roots, waiting until the client has named them (or [`ROOTS_TIMEOUT`] has passed, when
    /// the directory the server started in stands in for them).
    async fn list(&self) -> Arc<Vec<PathBuf>> {
        let mut rx = self.known.subscribe();
        let waited = tokio::time::timeout(ROOTS_TIMEOUT, rx.wait_for(Option::is_some)).await;
        if let Ok(Ok(roots)) = waited
            && let Some(roots) = roots.as_ref()
        {
            return roots.clone();
        }
        let here = Arc::new(vec![PathBuf::from(".")]);
        self.known.send_if_modified(|known| {
            let unset = known.is_none();
            if unset {
                *known = Some(here.clone());
            }
            unset
        });
        self.known.borrow().clone().unwrap_or(here)
    }

    /// The host for `dir`, opened on first use.
    async fn host(&self, dir: &Path) -> Result<Arc<Host>, Failure> {
        let mut hosts = self.hosts.lock().await;
        if let Some(known) = hosts.get(dir) {
            return known.clone();
        }
        let opened = (self.open)(dir.to_path_buf()).await.map(Arc::new);
        hosts.insert(dir.to_path_buf(), opened.clone());
        opened
    }

    /// Sets the roots; `true` when they changed. Hosts of roots no longer named are dropped
    /// (a call in flight keeps its own).
    async fn set(&self, roots: Vec<PathBuf>) -> bool {
        let changed = self.known.send_if_modified(|known| {
            let differs = known.as_deref().is_none_or(|k| *k != roots);
            if differs {
                *known = Some(Arc::new(roots.clone()));
            }
            differs
        });
        if changed {
            self.hosts.lock().await.retain(|dir, _| roots.contains(dir));
        }
        changed
    }

    /// Asks the client for its roots, when it declares the capability, and sets them: the
    /// client's `file://` roots, or the directory the server started in when it has none.
    // Roots are how today's clients name their workspace, although a later protocol revision
    // deprecates them.
    #[allow(deprecated)]
    async fn learn(&self, peer: &Peer<RoleServer>) -> bool {
        let declares = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        let mut roots = Vec::new();
        if declares {
            let listed = tokio::time::timeout(ROOTS_TIMEOUT, peer.list_roots()).await;
            if let Ok(Ok(listed)) = listed {
                roots = listed
                    .roots
                    .iter()
                    .filter_map(|r| file_uri_path(&r.uri))
                    .collect();
                roots.dedup();
            }
        }
        if roots.is_empty() {
            roots.push(PathBuf::from("."));
        }
        self.set(roots).await
    }
}

/// The path of a `file://` URI (percent-decoded); `None` for any other URI, a relative path, or
/// one that is not UTF-8 once decoded. Only an empty or `localhost` authority is local.
pub(crate) fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri
        .strip_prefix("file://")
        .or_else(|| uri.strip_prefix("FILE://"))?;
    let path = match rest.strip_prefix("localhost") {
        Some(p) if p.starts_with('/') => p,
        _ if rest.starts_with('/') => rest,
        _ => return None,
    };
    // A query or fragment is not part of the path.
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    let path = String::from_utf8(decoded).ok()?;
    if path.contains('\0') {
        return None;
    }
    // A trailing slash names the same directory.
    let trimmed = path.trim_end_matches('/');
    Some(PathBuf::from(if trimmed.is_empty() {
        "/"
    } else {
        trimmed
    }))
}

struct Server {
    roots: Roots,
}

/// The `tools/call` result of a failure: its `{code, message}` object as text, with `isError`.
fn error_result(failure: &Failure) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(failure.to_json().to_string())])
}

impl Server {
    /// The tool as listed for `host`, with a `root` argument when the client named several.
    fn tool(host: &Host, roots: Option<&[PathBuf]>) -> Tool {
        let mut schema = match host.tool().schema() {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let mut description = host.tool().description();
        if let Some(roots) = roots.filter(|r| r.len() > 1) {
            let names: Vec<Value> = roots
                .iter()
                .map(|r| Value::String(r.display().to_string()))
                .collect();
            if let Some(Value::Object(props)) = schema.get_mut("properties") {
                props.insert(
                    ROOT_ARGUMENT.to_owned(),
                    json!({
                        "type": "string",
                        "enum": names,
                        "description": "The workspace root to search: one of the client's roots. \
                                        Hit paths are relative to the top of its git worktree."
                    }),
                );
            }
            if let Some(Value::Array(required)) = schema.get_mut("required") {
                required.push(json!(ROOT_ARGUMENT));
            }
            description.push_str(" Pick the workspace root to search with `root`.");
        }
        let output = match host.tool().output_schema() {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        // Hints for the client: the tool only reads the worktree, and sees nothing beyond it.
        let annotations = ToolAnnotations::with_title(repo_search_tool::TOOL_TITLE)
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false);
        Tool::new(repo_search_tool::TOOL_NAME, description, Arc::new(schema))
            .with_title(repo_search_tool::TOOL_TITLE)
            .with_raw_output_schema(Arc::new(output))
            .with_annotations(annotations)
    }

    /// The host a call is for, and its arguments without `root`.
    async fn route(&self, mut arguments: Value) -> Result<(Arc<Host>, Value), Failure> {
        let client = match &self.roots {
            Roots::Fixed(host) => return Ok((host.clone(), arguments)),
            Roots::Client(client) => client,
        };
        let roots = client.list().await;
        let dir = if roots.len() == 1 {
            roots[0].clone()
        } else {
            let asked = arguments
                .as_object_mut()
                .and_then(|args| args.remove(ROOT_ARGUMENT));
            let asked = asked.as_ref().and_then(Value::as_str);
            roots
                .iter()
                .find(|r| asked == Some(r.display().to_string().as_str()))
                .cloned()
                .ok_or(Failure::RootNotOffered)?
        };
        Ok((client.host(&dir).await?, arguments))
    }

    /// Runs a call. Index queries refresh the index first, as the CLI does; a refresh that fails
    /// answers with the failure's own code and a fixed message.
    async fn call(&self, arguments: Value) -> CallToolResult {
        let answered = match self.route(arguments).await {
            Ok((host, arguments)) => host
                .answer(&arguments, Refresh::First)
                .await
                .map_err(Failure::from),
            Err(failure) => Err(failure),
        };
        match answered {
            Ok(v) => CallToolResult::structured(v),
            Err(failure) => error_result(&failure),
        }
    }

    /// The tool as listed now.
    async fn listed_tool(&self) -> Result<Tool, ErrorData> {
        let (host, roots) = match &self.roots {
            Roots::Fixed(host) => (host.clone(), None),
            Roots::Client(client) => {
                let roots = client.list().await;
                // The schema is the same for every root; it is read off the first root whose
                // host opens (every call to a root that does not open fails with its reason).
                let mut first = None;
                for dir in roots.iter() {
                    if let Ok(host) = client.host(dir).await {
                        first = Some(host);
                        break;
                    }
                }
                match first {
                    Some(host) => (host, Some(roots)),
                    None => {
                        let failure = match client.host(&roots[0]).await {
                            Err(failure) => failure,
                            Ok(_) => Failure::Mcp,
                        };
                        return Err(ErrorData::internal_error(
                            format!(
                                "{}: {}; {}",
                                failure.code(),
                                failure.message(),
                                failure.hint()
                            ),
                            None,
                        ));
                    }
                }
            }
        };
        Ok(Server::tool(&host, roots.as_deref().map(Vec::as_slice)))
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools();
        let capabilities = match self.roots {
            // The tool's `root` argument follows the client's roots.
            Roots::Client(_) => capabilities.enable_tool_list_changed().build(),
            Roots::Fixed(_) => capabilities.build(),
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "repo-search",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "repo_search searches this repository like ripgrep: fixed strings or regexes, \
                 narrowed by path, glob and file type. Use mode indexed_literal for fast ranked \
                 file hits, literal for every matching line; page with offset and page_token.",
            )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Roots::Client(client) = &self.roots {
            client.learn(&context.peer).await;
        }
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        if let Roots::Client(client) = &self.roots
            && client.learn(&context.peer).await
        {
            let _ = context.peer.notify_tool_list_changed().await;
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            self.listed_tool().await?,
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != repo_search_tool::TOOL_NAME {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            ));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        Ok(self.call(arguments).await.into())
    }
}

/// What `repo-search mcp` serves.
pub(crate) enum Serve {
    /// The host of `--root`.
    Root(Box<Host>),
    /// The client's roots, each opened by this function on its first use.
    ClientRoots(OpenHost),
}

/// Opens the host for a directory, with the rest of the command line's options.
pub(crate) type OpenHost =
    Box<dyn Fn(PathBuf) -> index_contract::BoxFuture<'static, Result<Host, Failure>> + Send + Sync>;

/// Serves until the client closes stdin. Lines go through [`crate::stdio`], which answers the
/// ones `rmcp` would drop.
pub(crate) async fn serve(what: Serve) -> Result<(), Failure> {
    let roots = match what {
        Serve::Root(host) => Roots::Fixed(Arc::new(*host)),
        Serve::ClientRoots(open) => Roots::Client(ClientRoots {
            open,
            known: watch::Sender::new(None),
            hosts: Mutex::default(),
        }),
    };
    let server = Server { roots };
    let (transport, stdio) = crate::stdio::start();
    let served = match server.serve(transport).await {
        Ok(running) => running.waiting().await.map(drop).map_err(|_| Failure::Mcp),
        Err(_) => Err(Failure::Mcp),
    };
    stdio.finish();
    served
}

#[cfg(test)]
mod tests {
    use super::file_uri_path;
    use std::path::PathBuf;

    fn check(uri: &str, expected: Option<&str>) {
        assert_eq!(file_uri_path(uri), expected.map(PathBuf::from), "{uri}");
    }

    #[test]
    fn only_local_file_uris_name_a_root() {
        check("file:///home/me/repo", Some("/home/me/repo"));
        check("file:///home/me/repo/", Some("/home/me/repo"));
        check("file://localhost/srv/x", Some("/srv/x"));
        check("file:///a%20b/%C3%A9", Some("/a b/é"));
        check("file:///", Some("/"));
        check("file:///a?x=1#frag", Some("/a"));
        check("file://host/share", None);
        check("file:relative", None);
        check("https://example.invalid/x", None);
        check("file:///a%2", None);
        check("file:///a%zz", None);
        check("file:///a%00b", None);
        check("file:///%ff", None);
    }
}
