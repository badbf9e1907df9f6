//! A minimal MCP client over stdio for the probes that time `repo-search mcp` as an agent sees
//! it (`mcp-probe`, `semantic-probe`): one request at a time, each reply matched by its id.
//!
//! A probe is a measurement, not a test: a failed exchange panics with what the server said.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

/// A running `repo-search mcp`, initialised.
pub struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Server {
    /// Starts `cmd` (a `repo-search mcp …` command line) and sends `initialize` and
    /// `notifications/initialized` as `client`.
    pub fn start(mut cmd: Command, client: &str) -> Server {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start repo-search mcp");
        let mut server = Server {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().expect("stdout")),
            child,
            next: 0,
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": client, "version": "0"}}),
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("the server's input is open");
        writeln!(stdin, "{message}").expect("write to the server");
        stdin.flush().expect("flush");
    }

    /// Sends one request and returns its reply (notifications in between are skipped).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut reply = String::new();
            if self.stdout.read_line(&mut reply).expect("read") == 0 {
                panic!("the server closed its output");
            }
            let v: Value = serde_json::from_str(&reply).expect("a JSON reply");
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// One `repo_search` call with `arguments`: its latency in ms and the whole reply.
    pub fn call(&mut self, arguments: Value) -> (f64, Value) {
        let started = Instant::now();
        let v = self.request(
            "tools/call",
            json!({"name": "repo_search", "arguments": arguments}),
        );
        (started.elapsed().as_secs_f64() * 1000.0, v)
    }

    /// Closes the server's input and waits for it to exit.
    pub fn stop(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
