import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { conversationsRepository, sandboxesRepository } from "@tern/db";
import { createSandboxedConversation, scaled, testSandboxDriver, waitFor } from "@tern/testing";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApiDeps } from "../src/deps.ts";
import { createRateLimiter, rateLimit } from "../src/middleware/rate-limit.ts";
import type { AgentServerEnv } from "../src/routes/agent-server/context.ts";
import { agentServerErrors } from "../src/routes/agent-server/errors.ts";
import { agentSandboxOpsRoutes } from "../src/routes/agent-server/sandbox-ops/index.ts";
import { checkResponse } from "./agent-server-contract.ts";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * The agent server's /api/bash, /api/file and /api/git, end to end: these routes in this
 * process, a real worker process (the API reaches the sandbox only through it) and real sandboxes.
 * They are mounted under a stand-in of the agent-server mount (which resolves the sandbox and its
 * caller), with the API's rate limiter after it, as the real mount has it.
 */
let api: TestApi;
let userId: string;
let base: string;
let close: () => Promise<void>;
const driver = testSandboxDriver();
const UPLOAD_CAP = 256 * 1024;
const STORM_LIMIT = 200;

beforeAll(async () => {
  api = await startTestApi({ worker: true });
  ({ userId } = await api.newUser());
  const deps: ApiDeps = { ...api.deps, config: { ...api.deps.config, AGENT_FILE_UPLOAD_MAX_BYTES: UPLOAD_CAP } };
  const limiter = createRateLimiter(api.redis, `${api.prefix}:agent-ops`, {
    RATE_LIMIT_PER_MINUTE: STORM_LIMIT,
    RATE_LIMIT_STARTS_PER_MINUTE: 0,
    RATE_LIMIT_MESSAGES_PER_MINUTE: 0,
  });
  const app = new Hono<AgentServerEnv>();
  app.use("/agent/:sandbox_id/*", async (c, next) => {
    const sandboxId = c.req.param("sandbox_id");
    c.set("agentSandbox", { sandboxId, userId, via: "api_key", conversationId: null });
    // The rate is per caller: a test names its own (a header only this stand-in reads).
    c.set("principal", { kind: "api_key", userId, isAdmin: false, keyId: c.req.header("x-test-caller") ?? sandboxId });
    await next();
  });
  if (limiter) app.use("/agent/:sandbox_id/*", rateLimit(limiter));
  app.route("/agent/:sandbox_id", agentSandboxOpsRoutes(deps));
  app.onError(agentServerErrors(api.logger));
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise<void>((resolve) => server.close(() => resolve()));
}, scaled(120_000));

afterAll(async () => {
  await close?.();
  await api?.close();
});

/** A running sandbox with a git workspace at /workspace/project (and its id). */
const newSandbox = async () => {
  const { conversationId, sandboxRef } = await createSandboxedConversation({
    db: api.database.db,
    sandboxes: driver,
    namespace: api.prefix,
    userId,
    tools: [],
  });
  const conversation = await conversationsRepository(api.database.db).get(conversationId);
  return { sandboxId: conversation?.sandboxId as string, sandboxRef };
};

const call = (sandboxId: string, path: string, init: RequestInit & { json?: unknown } = {}) => {
  const { json, ...rest } = init;
  return fetch(`${base}/agent/${sandboxId.replaceAll("-", "")}${path}`, {
    ...rest,
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
    headers: { ...(json === undefined ? {} : { "content-type": "application/json" }), ...(rest.headers ?? {}) },
  });
};

interface BashOutput {
  kind: "BashOutput";
  id: string;
  command_id: string;
  order: number;
  exit_code: number | null;
  stdout: string | null;
  stderr: string | null;
  timestamp: string;
}

/** What RemoteWorkspace._execute_command_generator does: start, then poll BashOutput with order__gt. */
const runLikeTheSdk = async (sandboxId: string, command: string, opts: { cwd?: string; timeout?: number } = {}) => {
  const started = await call(sandboxId, "/api/bash/start_bash_command", {
    method: "POST",
    json: { command, timeout: opts.timeout ?? 60, ...(opts.cwd ? { cwd: opts.cwd } : {}) },
  });
  expect(started.status).toBe(200);
  const cmd = (await started.json()) as { id: string; kind: string; command: string; timestamp: string };
  checkResponse("BashCommand", cmd);
  expect(cmd).toMatchObject({ kind: "BashCommand", command });
  expect(cmd.id).toMatch(/^[0-9a-f]{32}$/);
  let last = -1;
  let stdout = "";
  let stderr = "";
  const seen = new Set<string>();
  const exitCode = await waitFor(
    async () => {
      const q = new URLSearchParams({
        command_id__eq: cmd.id,
        sort_order: "TIMESTAMP",
        limit: "100",
        kind__eq: "BashOutput",
      });
      if (last >= 0) q.set("order__gt", String(last));
      const res = await call(sandboxId, `/api/bash/bash_events/search?${q}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as { items: BashOutput[]; next_page_id: string | null };
      checkResponse("BashEventPage", page);
      let exit: number | null = null;
      for (const e of page.items) {
        expect(seen.has(e.id)).toBe(false);
        seen.add(e.id);
        last = Math.max(last, e.order);
        stdout += e.stdout ?? "";
        stderr += e.stderr ?? "";
        if (e.exit_code !== null) exit = e.exit_code;
      }
      return exit === null ? null : { exit };
    },
    { what: `the command ${command} to finish`, timeoutMs: 60_000, intervalMs: 100 },
  );
  return { id: cmd.id, exitCode: exitCode.exit, stdout, stderr };
};

describe("/api/bash", () => {
  it("runs a command as the SDK does (start, then poll its outputs) in the workspace, as the sandbox user", async () => {
    const { sandboxId } = await newSandbox();
    const r = await runLikeTheSdk(sandboxId, "pwd; id -u; echo oops >&2; exit 3");
    expect(r.exitCode).toBe(3);
    expect(r.stdout).toBe("/workspace/project\n1000\n");
    expect(r.stderr).toBe("oops\n");
    const inTmp = await runLikeTheSdk(sandboxId, "pwd", { cwd: "/tmp" });
    expect(inTmp).toMatchObject({ exitCode: 0, stdout: "/tmp\n" });
  });

  it("execute_bash_command answers the last BashOutput; events can be read, searched and cleared", async () => {
    const { sandboxId } = await newSandbox();
    const res = await call(sandboxId, "/api/bash/execute_bash_command", {
      method: "POST",
      json: { command: "echo hi" },
    });
    expect(res.status).toBe(200);
    const out = (await res.json()) as BashOutput;
    checkResponse("BashOutput", out);
    expect(out).toMatchObject({ kind: "BashOutput", exit_code: 0, stdout: "hi\n", stderr: null, order: 0 });
    expect(out.command_id).toMatch(/^[0-9a-f]{32}$/);
    expect(Number.isNaN(Date.parse(out.timestamp))).toBe(false);

    const one = await call(sandboxId, `/api/bash/bash_events/${out.id}`);
    expect(one.status).toBe(200);
    expect(await one.json()).toEqual(out);
    const command = (await (await call(sandboxId, `/api/bash/bash_events/${out.command_id}`)).json()) as {
      kind: string;
      command: string;
      timeout: number;
      cwd: string | null;
    };
    expect(command).toMatchObject({ kind: "BashCommand", command: "echo hi", timeout: 300, cwd: null });
    const missing = await call(sandboxId, "/api/bash/bash_events/0123456789abcdef0123456789abcdef");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ detail: "Not Found" });

    await call(sandboxId, "/api/bash/execute_bash_command", { method: "POST", json: { command: "echo two" } });
    // Paging: one event a page, in emission order, then backwards.
    const ids: string[] = [];
    let page: string | null = null;
    do {
      const q: string = page ? `&page_id=${page}` : "";
      const body = (await (await call(sandboxId, `/api/bash/bash_events/search?limit=1${q}`)).json()) as {
        items: { id: string; kind: string }[];
        next_page_id: string | null;
      };
      expect(body.items).toHaveLength(1);
      ids.push((body.items[0] as { id: string }).id);
      page = body.next_page_id;
    } while (page);
    expect(ids).toHaveLength(4);
    const desc = (await (await call(sandboxId, "/api/bash/bash_events/search?sort_order=TIMESTAMP_DESC")).json()) as {
      items: { id: string }[];
    };
    expect(desc.items.map((e) => e.id)).toEqual([...ids].reverse());
    const commands = (await (await call(sandboxId, "/api/bash/bash_events/search?kind__eq=BashCommand")).json()) as {
      items: { kind: string }[];
    };
    expect(commands.items.map((e) => e.kind)).toEqual(["BashCommand", "BashCommand"]);

    // Another sandbox's events are not this one's.
    const other = await newSandbox();
    const theirs = (await (await call(other.sandboxId, "/api/bash/bash_events/search")).json()) as { items: unknown[] };
    expect(theirs.items).toEqual([]);
    expect((await call(other.sandboxId, `/api/bash/bash_events/${out.id}`)).status).toBe(404);

    const cleared = await call(sandboxId, "/api/bash/bash_events", { method: "DELETE" });
    expect(await cleared.json()).toEqual({ cleared_count: 4 });
    const after = (await (await call(sandboxId, "/api/bash/bash_events/search")).json()) as { items: unknown[] };
    expect(after.items).toEqual([]);
  });

  it("ends a command past its timeout with exit -1, and one that cannot start with -1 and the reason", async () => {
    const { sandboxId } = await newSandbox();
    const slow = await call(sandboxId, "/api/bash/execute_bash_command", {
      method: "POST",
      json: { command: "echo before; sleep 30", timeout: 1 },
    });
    expect(await slow.json()).toMatchObject({ exit_code: -1, stdout: "before\n" });
    const nowhere = await call(sandboxId, "/api/bash/execute_bash_command", {
      method: "POST",
      json: { command: "true", cwd: "/no/such/dir" },
    });
    const out = (await nowhere.json()) as BashOutput;
    expect(out.exit_code).toBe(-1);
    expect(out.stderr).toMatch(/^Error executing command: /);
  });

  it("answers FastAPI's 422 for a bad request or query", async () => {
    const { sandboxId } = await newSandbox();
    const noCommand = await call(sandboxId, "/api/bash/start_bash_command", { method: "POST", json: { cwd: "/tmp" } });
    expect(noCommand.status).toBe(422);
    expect(((await noCommand.json()) as { detail: { loc: string[] }[] }).detail[0]?.loc).toEqual(["body", "command"]);
    expect((await call(sandboxId, "/api/bash/bash_events/search?limit=101")).status).toBe(422);
    expect((await call(sandboxId, "/api/bash/bash_events/search?kind__eq=Nope")).status).toBe(422);
    expect((await call(sandboxId, "/api/bash/bash_events/search?command_id__eq=zz")).status).toBe(422);
  });
});

/** A multipart body as requests (and httpx) send it: the file in the `file` field. */
const multipart = (content: Uint8Array, name = "up.bin") => {
  const form = new FormData();
  form.append("other", "ignored");
  form.append("file", new Blob([Buffer.from(content)]), name);
  return form;
};

describe("/api/file", () => {
  it("uploads and downloads a binary file, streamed both ways", async () => {
    const { sandboxId, sandboxRef } = await newSandbox();
    const content = new Uint8Array(200 * 1024);
    for (let i = 0; i < content.length; i++) content[i] = (i * 7919) % 256;
    const path = "/workspace/project/deep/er/up.bin";
    const up = await call(sandboxId, `/api/file/upload?path=${encodeURIComponent(path)}`, {
      method: "POST",
      body: multipart(content),
    });
    expect(up.status).toBe(200);
    expect(await up.json()).toEqual({ success: true });
    const sum = await driver.exec(sandboxRef, { cmd: ["bash", "-c", `stat -c '%s %U' ${path}`] });
    expect(sum.stdout.trim()).toBe(
      `${content.length} ${(await driver.exec(sandboxRef, { cmd: ["id", "-un"] })).stdout.trim()}`,
    );

    const down = await call(sandboxId, `/api/file/download?path=${encodeURIComponent(path)}`);
    expect(down.status).toBe(200);
    expect(down.headers.get("content-type")).toBe("application/octet-stream");
    expect(Buffer.from(await down.arrayBuffer()).equals(Buffer.from(content))).toBe(true);

    const none = await call(sandboxId, "/api/file/download?path=/workspace/project/none.txt");
    expect(none.status).toBe(404);
    expect(((await none.json()) as { detail: string }).detail).toBe("File not found");
    expect((await call(sandboxId, "/api/file/download?path=/workspace/project")).status).toBe(400);
  });

  it("refuses an upload over the cap with 413 and writes nothing", async () => {
    const { sandboxId, sandboxRef } = await newSandbox();
    const path = "/workspace/project/big.bin";
    const res = await call(sandboxId, `/api/file/upload?path=${encodeURIComponent(path)}`, {
      method: "POST",
      body: multipart(new Uint8Array(UPLOAD_CAP + 1)),
    });
    expect(res.status).toBe(413);
    expect(typeof ((await res.json()) as { detail: unknown }).detail).toBe("string");
    const ls = async () => (await driver.exec(sandboxRef, { cmd: ["bash", "-c", "ls -A /workspace/project"] })).stdout;
    expect(await ls()).not.toMatch(/big\.bin/);
    // The worker removes its partial copy once the API has answered.
    await waitFor(async () => !/tern-upload/.test(await ls()), { what: "the partial upload to be removed" });
    expect(await ls()).not.toMatch(/big\.bin/);
    // Exactly the cap is taken.
    const ok = await call(sandboxId, `/api/file/upload?path=${encodeURIComponent(path)}`, {
      method: "POST",
      body: multipart(new Uint8Array(UPLOAD_CAP)),
    });
    expect(ok.status).toBe(200);
  });

  it("refuses a path outside the workspace both ways: .., absolute elsewhere, a symlink out, a relative path", async () => {
    const { sandboxId, sandboxRef } = await newSandbox();
    await driver.exec(sandboxRef, {
      cmd: ["bash", "-c", "ln -s /etc /workspace/project/etc-link && echo x > /tmp/outside"],
    });
    for (const path of [
      "/workspace/project/../../etc/passwd",
      "/etc/passwd",
      "/workspace/project/etc-link/passwd",
      "/workspace/project/missing/../../../tmp/outside",
    ]) {
      const down = await call(sandboxId, `/api/file/download?path=${encodeURIComponent(path)}`);
      expect(down.status, `download ${path}`).toBe(403);
      expect(((await down.json()) as { detail: string }).detail).toMatch(/outside the workspace/);
    }
    for (const path of ["/workspace/project/../../tmp/evil", "/tmp/evil", "/workspace/project/etc-link/evil"]) {
      const up = await call(sandboxId, `/api/file/upload?path=${encodeURIComponent(path)}`, {
        method: "POST",
        body: multipart(new TextEncoder().encode("evil")),
      });
      expect(up.status, `upload ${path}`).toBe(403);
    }
    const evil = await driver.exec(sandboxRef, { cmd: ["bash", "-c", "ls /tmp/evil /etc/evil 2>&1; true"] });
    expect(evil.stdout).toMatch(/No such file/);
    expect(evil.stdout).not.toMatch(/^\/tmp\/evil$/m);
    const relative = await call(sandboxId, "/api/file/download?path=project/README.md");
    expect(relative.status).toBe(400);
    expect(await relative.json()).toMatchObject({ detail: "Path must be absolute" });
  });
});

describe("/api/git", () => {
  it("lists the workspace's changes against HEAD and one file's diff", async () => {
    const { sandboxId, sandboxRef } = await newSandbox();
    const setup = await driver.exec(sandboxRef, {
      cmd: [
        "bash",
        "-c",
        `set -e; cd /workspace/project; git config user.name t; git config user.email t@t
         printf 'one\\n' > a.txt; echo gone > b.txt; echo same > c.txt; git add -A; git commit -qm init
         printf 'two\\n' > a.txt; rm b.txt; echo new > d.txt`,
      ],
    });
    expect(setup.exitCode, setup.stderr).toBe(0);
    const res = await call(sandboxId, "/api/git/changes?path=/workspace/project");
    expect(res.status).toBe(200);
    const changes = (await res.json()) as { status: string; path: string }[];
    for (const change of changes) checkResponse("GitChange", change);
    expect(changes).toEqual(
      expect.arrayContaining([
        { status: "UPDATED", path: "a.txt" },
        { status: "DELETED", path: "b.txt" },
        { status: "ADDED", path: "d.txt" },
      ]),
    );
    expect(changes).toHaveLength(3);

    const diff = await (await call(sandboxId, "/api/git/diff?path=/workspace/project/a.txt")).json();
    checkResponse("GitDiff", diff);
    expect(diff).toEqual({ modified: "two\n", original: "one\n" });
    const added = await call(sandboxId, "/api/git/diff?path=/workspace/project/d.txt");
    expect(await added.json()).toEqual({ modified: "new\n", original: null });
    const deleted = await call(sandboxId, "/api/git/diff?path=/workspace/project/b.txt");
    expect(await deleted.json()).toEqual({ modified: null, original: "gone\n" });

    // Not a repository: no changes (as the agent server answers); outside the workspace: refused.
    await driver.exec(sandboxRef, { cmd: ["bash", "-c", "mkdir -p /workspace/plain"] });
    expect(await (await call(sandboxId, "/api/git/changes?path=/workspace/plain")).json()).toEqual([]);
    expect((await call(sandboxId, "/api/git/changes?path=/etc")).status).toBe(403);
    expect((await call(sandboxId, "/api/git/changes")).status).toBe(422);
  });
});

describe("the sandbox's state", () => {
  it("answers 409 while the sandbox is paused and 410 once it is gone, on every route", async () => {
    const { sandboxId } = await newSandbox();
    const routes: [string, RequestInit & { json?: unknown }][] = [
      ["/api/bash/start_bash_command", { method: "POST", json: { command: "true" } }],
      ["/api/bash/execute_bash_command", { method: "POST", json: { command: "true" } }],
      ["/api/file/upload?path=/workspace/project/x", { method: "POST", body: multipart(new Uint8Array(3)) }],
      ["/api/file/download?path=/workspace/project/x", {}],
      ["/api/git/changes?path=/workspace/project", {}],
      ["/api/git/diff?path=/workspace/project/x", {}],
    ];
    for (const [status, code] of [
      ["PAUSED", 409],
      ["MISSING", 410],
    ] as const) {
      await sandboxesRepository(api.database.db).update(sandboxId, { status });
      for (const [path, init] of routes) {
        const init2 = init.body ? { ...init, body: multipart(new Uint8Array(3)) } : init;
        const res = await call(sandboxId, path, init2);
        expect(res.status, `${status} ${path}`).toBe(code);
        expect(typeof ((await res.json()) as { detail: unknown }).detail).toBe("string");
      }
    }
  });
});

describe("abuse", () => {
  it(
    "holds a 3,000-poll storm (15 × its budget) on bash_events/search with the rate limiter, and stays up",
    async () => {
      const { sandboxId } = await newSandbox();
      const caller = { "x-test-caller": `storm-${sandboxId}` };
      const counts: Record<number, number> = {};
      let next = 0;
      const TOTAL = 3_000;
      const one = async () => {
        while (next < TOTAL) {
          next++;
          const res = await call(sandboxId, "/api/bash/bash_events/search", { headers: caller });
          await res.body?.cancel();
          counts[res.status] = (counts[res.status] ?? 0) + 1;
        }
      };
      const began = Date.now();
      await Promise.all(Array.from({ length: 32 }, one));
      // Fixed one-minute windows: a storm longer than a minute meets a fresh budget in each it spans.
      const windows = Math.floor((Date.now() - began) / 60_000) + 2;
      expect(Object.keys(counts).sort()).toEqual(["200", "429"]);
      expect(counts[200]).toBeGreaterThanOrEqual(STORM_LIMIT);
      expect(counts[200]).toBeLessThanOrEqual(STORM_LIMIT * windows);
      expect(counts[429]).toBe(TOTAL - (counts[200] ?? 0));
      // Still serving: another caller is answered, and its command runs.
      const res = await call(sandboxId, "/api/bash/execute_bash_command", {
        method: "POST",
        json: { command: "echo alive" },
        headers: { "x-test-caller": `after-${sandboxId}` },
      });
      expect(await res.json()).toMatchObject({ exit_code: 0, stdout: "alive\n" });
      const search = await call(sandboxId, "/api/bash/bash_events/search", {
        headers: { "x-test-caller": `after-${sandboxId}` },
      });
      expect(search.status).toBe(200);
    },
    scaled(120_000),
  );
});

describe("a worker's death", () => {
  it(
    "a command whose worker died is found finished with an error exit by a poll after the restart",
    async () => {
      const { sandboxId } = await newSandbox();
      const started = await call(sandboxId, "/api/bash/start_bash_command", {
        method: "POST",
        json: { command: "echo started; sleep 600", timeout: 900 },
      });
      const { id } = (await started.json()) as { id: string };
      const poll = async () =>
        (
          (await (
            await call(sandboxId, `/api/bash/bash_events/search?command_id__eq=${id}&kind__eq=BashOutput`)
          ).json()) as { items: BashOutput[] }
        ).items;
      // Running: no last output yet.
      expect(await poll()).toEqual([]);
      await api.stack.worker.kill();
      await api.stack.startWorker();
      const items = await waitFor(async () => ((await poll()).some((e) => e.exit_code !== null) ? poll() : null), {
        what: "the orphaned command to be finished",
        timeoutMs: 60_000,
        intervalMs: 250,
      });
      const last = items.at(-1) as BashOutput;
      expect(last.exit_code).toBe(-1);
      expect(last.stderr).toMatch(/worker running it stopped/);
      // The new worker runs commands.
      const after = await call(sandboxId, "/api/bash/execute_bash_command", {
        method: "POST",
        json: { command: "echo back" },
      });
      expect(await after.json()).toMatchObject({ exit_code: 0, stdout: "back\n" });
    },
    scaled(180_000),
  );
});
