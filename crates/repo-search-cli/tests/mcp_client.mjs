// A real MCP client, the official TypeScript SDK (installed by `cargo xtask tools` into
// target/tools/mcp-node), driving `repo-search mcp` over stdio.
//
// Usage: node mcp_client.mjs SDK_DIR SCENARIO CONFIG_JSON
// Prints one JSON object describing what the server answered; the Rust test (tests/mcp_ts.rs)
// asserts on it. `Client.callTool` validates every result that carries structured content
// against the tool's `outputSchema`, errors included, and throws when it does not conform: each
// call below is therefore also a conformance check, reported as `threw`.
import { createRequire } from "node:module";
import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, scenario, configText] = process.argv.slice(2);
const config = JSON.parse(configText);
const require = createRequire(join(sdkDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { ListRootsRequestSchema } = require("@modelcontextprotocol/sdk/types.js");

/// Starts the server and connects a client; `roots` (paths) makes the client declare the
/// capability and answer `roots/list` with them.
async function connect({ args, cwd, roots }) {
  const capabilities = roots ? { roots: { listChanged: true } } : {};
  const client = new Client({ name: "repo-search-ts-test", version: "1.0.0" }, { capabilities });
  const state = { roots, toolListChanged: 0 };
  if (roots) {
    client.setRequestHandler(ListRootsRequestSchema, async () => ({
      roots: state.roots.map((p, i) => ({ uri: pathToFileURL(p).href, name: `root ${i}` })),
    }));
  }
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === "notifications/tools/list_changed") state.toolListChanged += 1;
  };
  const transport = new StdioClientTransport({ command: config.exe, args, cwd, stderr: "pipe" });
  await client.connect(transport);
  return { client, state };
}

/// A call, summed up: the result's error flag, its structured content or the JSON in its text,
/// or the exception the SDK threw (a protocol error, or a result that broke the output schema).
async function call(client, args) {
  try {
    const res = await client.callTool({ name: "repo_search", arguments: args });
    const text = res.content?.[0]?.text;
    return {
      isError: res.isError === true,
      structured: res.structuredContent ?? null,
      text: text === undefined ? null : JSON.parse(text),
    };
  } catch (e) {
    return { threw: `${e.code ?? ""} ${e.message}` };
  }
}

function listed(tools) {
  return tools.tools.map((t) => ({
    name: t.name,
    properties: Object.keys(t.inputSchema.properties ?? {}).sort(),
    required: t.inputSchema.required ?? [],
    modes: t.inputSchema.properties?.mode?.enum ?? null,
    root: t.inputSchema.properties?.root?.enum ?? null,
    outputSchema: t.outputSchema !== undefined,
  }));
}

/// Waits for `pred` to hold, up to `ms`.
async function until(pred, ms) {
  const end = Date.now() + ms;
  while (!pred() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return pred();
}

/// Holds the index's writer lock from another process (util-linux `flock`, the same `flock(2)`
/// lock the index takes) until the returned function is called, which ends that process group.
async function holdLock(path) {
  const child = spawn("flock", ["-x", path, "-c", "echo locked; exec sleep 60"], {
    stdio: ["ignore", "pipe", "inherit"],
    detached: true,
  });
  await new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => d.toString().includes("locked") && resolve());
    child.on("error", reject);
    child.on("exit", (code) => reject(new Error(`flock exited with ${code}`)));
  });
  return () => process.kill(-child.pid, "SIGKILL");
}

const out = {};
if (scenario === "tool") {
  const { client } = await connect({
    args: ["mcp", "--root", config.root, "--index-dir", config.indexDir, "--model-dir", config.modelDir, "--deadline-ms", "1000"],
    cwd: config.root,
  });
  out.server = client.getServerVersion()?.name;
  out.tools = listed(await client.listTools());
  for (const mode of out.tools[0].modes) {
    out[mode] = await call(client, { query: config.query, mode });
  }
  // A page token round trip in each paging mode: pages of one hit concatenate to the answer.
  for (const mode of ["literal", "indexed_literal"]) {
    const pages = [];
    let args = { query: config.query, mode, max_results: 1 };
    for (let i = 0; i < 10; i++) {
      const page = await call(client, args);
      pages.push(page);
      const s = page.structured;
      if (!s || s.next_offset === undefined) break;
      args = { ...args, offset: s.next_offset, page_token: s.page_token };
    }
    out[`pages_${mode}`] = pages;
  }
  // Every code the tool can answer with through MCP.
  out.unsupported = await call(client, { query: "fn (", regex: true });
  out.limit = await call(client, { query: config.query, max_results: 10001 });
  out.untrusted = await call(client, { query: config.query, path: "../escape" });
  // A page whose earlier hits changed since its token was made.
  const first = await call(client, { query: config.query, mode: "literal", max_results: 1 });
  writeFileSync(join(config.root, "0-first.txt"), `${config.query} sorts first now\n`);
  out.stale = await call(client, {
    query: config.query, mode: "literal", max_results: 1,
    offset: first.structured?.next_offset ?? 1, page_token: first.structured?.page_token ?? "",
  });
  // Another writer holds the index while a file changed: the refresh cannot commit in time.
  const release = await holdLock(join(config.indexDir, "LOCK"));
  appendFileSync(join(config.root, "0-first.txt"), `${config.query} again\n`);
  out.timeout = await call(client, { query: config.query, mode: "indexed_literal" });
  release();
  // A directory where the index's lock file belongs: the changed file cannot be committed.
  rmSync(join(config.indexDir, "LOCK"));
  mkdirSync(join(config.indexDir, "LOCK"));
  appendFileSync(join(config.root, "0-first.txt"), `${config.query} once more\n`);
  out.failed = await call(client, { query: config.query, mode: "indexed_literal" });
  out.after_failed_literal = await call(client, { query: config.query, mode: "literal" });
  await client.close();
} else if (scenario === "roots") {
  // No --root: the client's roots name the worktrees; the server starts in `cwd`.
  const { client, state } = await connect({
    args: ["mcp", ...(config.indexDir ? ["--index-dir", config.indexDir] : [])],
    cwd: config.cwd,
    roots: config.roots,
  });
  out.tools = listed(await client.listTools());
  out.calls = [];
  for (const root of config.roots) {
    const args = { query: config.query, mode: "indexed_literal" };
    if (config.roots.length > 1) args.root = root;
    out.calls.push(await call(client, args));
  }
  out.missing_root = config.roots.length > 1 ? await call(client, { query: config.query }) : null;
  out.unknown_root = await call(client, { query: config.query, root: "/not/a/root" });
  if (config.changeTo) {
    state.roots = config.changeTo;
    await client.sendRootsListChanged();
    out.list_changed = await until(() => state.toolListChanged > 0, 10000);
    out.tools_after = listed(await client.listTools());
    out.after = await call(client, { query: config.query, mode: "indexed_literal" });
  }
  await client.close();
} else if (scenario === "no-roots") {
  const { client } = await connect({ args: ["mcp", "--index-dir", config.indexDir], cwd: config.cwd });
  out.tools = listed(await client.listTools());
  out.call = await call(client, { query: config.query, mode: "indexed_literal" });
  await client.close();
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
console.log(JSON.stringify(out));
