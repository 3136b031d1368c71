import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { callWorker } from "../src/worker-access.ts";

/**
 * callWorker reuses its read of the worker directory for a moment (two Redis round trips per
 * bash command otherwise). A worker gone since must cost one failed connect, never a refused
 * operation: the directory is read afresh and the live worker answers.
 */
const servers: Server[] = [];

const worker = async (): Promise<{ url: string; close: () => Promise<void> }> => {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json", connection: "close" });
    res.end("[]");
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};

afterAll(async () => {
  for (const s of servers) if (s.listening) await new Promise<void>((resolve) => s.close(() => resolve()));
});

/** A worker directory in memory, read as @tern/queue's liveWorkers reads Redis; counts its reads. */
const directory = (prefix: string) => {
  const workers = new Map<string, string>();
  let reads = 0;
  const redis = {
    zrangebyscore: async () => {
      reads++;
      return [...workers.keys()];
    },
    mget: async (keys: string[]) =>
      keys.map((k) => {
        const workerId = k.slice(`${prefix}:worker-endpoint:`.length);
        const url = workers.get(workerId);
        return url ? JSON.stringify({ workerId, url, engineId: null, startedAt: new Date().toISOString() }) : null;
      }),
  };
  return { redis, workers, reads: () => reads };
};

const silent = { warn: () => undefined, error: () => undefined, info: () => undefined, debug: () => undefined };

describe("callWorker's worker directory", () => {
  it("reads the directory once for calls close together, and afresh when the worker it read is gone", async () => {
    const dir = directory("p");
    const old = await worker();
    dir.workers.set("w-old", old.url);
    const deps = {
      db: {} as never,
      redis: dir.redis as never,
      logger: silent as never,
      workerAccess: { prefix: "p", token: "t" },
    };
    const sandbox = { id: "00000000-0000-4000-8000-000000000001", engineId: null };
    const call = async () => {
      const res = await callWorker(deps, sandbox, "gitChanges", { path: "/workspace" });
      await res.body?.cancel();
      return res.status;
    };
    for (let i = 0; i < 3; i++) expect(await call()).toBe(200);
    expect(dir.reads()).toBe(1);

    // The worker stopped and another took its place, within the moment the read is kept.
    await old.close();
    const next = await worker();
    dir.workers.delete("w-old");
    dir.workers.set("w-new", next.url);
    expect(await call()).toBe(200);
    expect(dir.reads()).toBe(2);
  });
});
