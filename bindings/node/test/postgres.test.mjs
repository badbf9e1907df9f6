// The shared index in PostgreSQL through the binding, against a real server. Run without
// `PGHOST`, this file runs itself again under `pg_virtualenv -t` (Debian's postgresql-common,
// which `cargo xtask tools` installs), which makes a throwaway cluster and exports the `PG*`
// variables. It never skips: without PostgreSQL it fails.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import {
  createIndexedRepositoryOperations,
  createPostgresIndex,
  IndexError,
} from "repo-search/agent";
import { rgFiles, worktree } from "./helpers.mjs";

if (!process.env.PGHOST) {
  test("the shared index in a throwaway PostgreSQL cluster", () => {
    const self = fileURLToPath(import.meta.url);
    // Without the outer runner's context, the inner one reports as TAP text rather than to it.
    const { NODE_TEST_CONTEXT, ...env } = process.env;
    const run = spawnSync("pg_virtualenv", ["-t", process.execPath, "--test", self], { encoding: "utf8", env });
    assert.equal(run.error, undefined, `pg_virtualenv could not start: ${run.error}`);
    assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stdout, /# pass 3/, run.stdout);
  });
} else {
  const env = (name) => {
    const v = process.env[name];
    if (!v) throw new Error(`pg_virtualenv did not export ${name}`);
    return v;
  };
  const host = process.env.PGHOST.startsWith("/") ? "localhost" : process.env.PGHOST;
  const url = (password = env("PGPASSWORD")) =>
    `postgresql://${env("PGUSER")}:${password}@${host}:${env("PGPORT")}/${env("PGDATABASE")}`;

  const files = {};
  for (let i = 0; i < 60; i++) files[`src/m${i % 5}/f${i}.rs`] = `fn item_${i}() { shared_${i % 3} }\n`;
  const cwd = worktree(files);

  test("indexed_literal from PostgreSQL finds the files rg -l finds", async () => {
    const index = await createPostgresIndex(url(), { cwd, tenantId: "node-equal" });
    const ops = createIndexedRepositoryOperations(cwd, { index, allowedModes: ["literal", "indexed_literal"] });
    for (const query of ["shared_1", "item_7()", "fn", "absent text"]) {
      const r = await ops.search({ query, mode: "indexed_literal", maxResults: 1000 });
      assert.equal(r.untrusted_index, true);
      assert.deepEqual(r.hits.map((h) => h.path).sort(), rgFiles(cwd, query), query);
    }
  });

  test("a write in the worktree is pushed before the next search", async () => {
    const index = await createPostgresIndex(url(), { cwd, tenantId: "node-push" });
    const ops = createIndexedRepositoryOperations(cwd, { index, allowedModes: ["literal", "indexed_literal"] });
    assert.deepEqual((await ops.search({ query: "pushed_token", mode: "indexed_literal" })).hits, []);
    writeFileSync(path.join(cwd, "src/new.rs"), "fn pushed_token() {}\n");
    const r = await ops.search({ query: "pushed_token", mode: "indexed_literal" });
    assert.deepEqual(r.hits.map((h) => h.path), ["src/new.rs"]);
  });

  test("a wrong password fails without echoing it", async () => {
    const secret = "not-the-password-3141";
    let error;
    try {
      await createPostgresIndex(url(secret), { cwd, tenantId: "node-denied" });
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof IndexError, String(error));
    assert.equal(error.code, "ERR_PRISM_INDEX_FAILED");
    assert.ok(!error.message.includes(secret) && !String(error.stack).includes(secret), error.message);
  });
}
