import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import {
  appEntry,
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  freePort,
  repoRoot,
  scaled,
  startService,
  type TestDatabase,
  testSandboxNetworkName,
  testSecretsKey,
  waitFor,
} from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * Production runs compiled JavaScript (`pnpm build`; packages resolve to dist/ under the
 * tern-dist condition), migrates once per deploy, and each process only checks the schema.
 */

let database: TestDatabase;
const prefix = createRedisPrefix();
const children: ChildProcess[] = [];

// dist/ is the run's global set-up's build (packages/testing/src/global-setup.ts, scripts/build.mjs).
beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await database.drop();
  await deleteRedisPrefix(prefix);
});

describe("compiled runtime", () => {
  it("start.sh runs no TypeScript loader", () => {
    const script = readFileSync(`${repoRoot}/scripts/start.sh`, "utf8");
    expect(script).not.toMatch(/tsx|ts-node|--experimental-strip-types|\.ts\b/);
    expect(script).toMatch(/apps\/api\/dist\/main\.js/);
    expect(script).toMatch(/apps\/worker\/dist\/main\.js/);
  });

  // Node 20 cannot load a .ts file without a loader, and none is given: serving proves it is all JavaScript.
  it("the compiled API serves, with no TypeScript file loaded", async () => {
    const port = await freePort();
    const child = spawn(process.execPath, appEntry("api"), {
      cwd: repoRoot,
      env: {
        ...process.env,
        NODE_OPTIONS: "",
        DATABASE_URL: database.url,
        REDIS_PREFIX: prefix,
        SECRETS_KEY: testSecretsKey,
        PORT: String(port),
        HOST: "127.0.0.1",
        LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    });
    children.push(child);
    let out = "";
    child.stdout?.on("data", (d) => (out += d));
    child.stderr?.on("data", (d) => (out += d));
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`api exited ${child.exitCode}: ${out}`);
        return (await fetch(`http://127.0.0.1:${port}/health`).catch(() => null))?.ok === true;
      },
      { what: "the compiled API to answer /health", timeoutMs: 30_000 },
    );
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/app-conversations/search`);
    expect(res.status).toBe(401);
    child.kill("SIGTERM");
    const [code] = await once(child, "exit");
    expect(code).toBe(0);
  });

  it("the compiled worker starts and is ready", async () => {
    const worker = await startService("worker", {
      DATABASE_URL: database.url,
      REDIS_PREFIX: prefix,
      SANDBOX_POOL_SIZE: "0",
      SANDBOX_NETWORK: testSandboxNetworkName(),
      WORKER_ID: "compiled",
      NODE_OPTIONS: "",
    });
    children.push(worker.child);
    expect(await worker.stop()).toBe(0);
  });
});

describe("a schema behind the release", () => {
  it("the api and the worker refuse to start, saying what to run, and migrate nothing", async () => {
    const behind = await createTestDatabase();
    try {
      const last = await sql<{ name: string }>`select name from kysely_migration order by name desc limit 1`.execute(
        behind.db,
      );
      const name = last.rows[0]!.name;
      await sql`delete from kysely_migration where name = ${name}`.execute(behind.db);
      for (const app of ["api", "worker"] as const) {
        const res = spawnSync(process.execPath, appEntry(app), {
          cwd: repoRoot,
          env: {
            ...process.env,
            DATABASE_URL: behind.url,
            REDIS_PREFIX: prefix,
            SECRETS_KEY: testSecretsKey,
            PORT: "0",
            WORKER_HTTP_PORT: "0",
          },
          encoding: "utf8",
          timeout: scaled(30_000),
        });
        expect(res.status, `${app}: ${res.stderr}`).toBe(78);
        expect(res.stderr).toContain("the database schema is behind this release: 1 migration(s) not applied");
        expect(res.stderr).toContain(name);
        expect(res.stderr).toContain("pnpm db:migrate");
        expect(res.stderr).not.toMatch(/\n\s+at /);
      }
      const still = await sql<{
        n: number;
      }>`select count(*)::int as n from kysely_migration where name = ${name}`.execute(behind.db);
      expect(still.rows[0]?.n).toBe(0);
    } finally {
      await behind.drop();
    }
  });
});
