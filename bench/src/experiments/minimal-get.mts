/**
 * Experiment (not part of `pnpm bench`): the batch-GET load of the bench against a minimal Hono
 * handler that does the API's two queries (key lookup, conversations) with pg directly, to tell
 * the cost of Postgres round trips from the cost of our code. ONE=1 folds both into one query.
 * Usage: node --import tsx bench/src/experiments/minimal-get.mts
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { freePort, repoRoot, type ServiceProcess } from "@tern/testing";
import { createContext } from "../context.ts";
import { conversationsGetRows } from "../rows/conversations-get.ts";

const ctx = createContext(false);
const rows = await conversationsGetRows(ctx, async (databaseUrl) => {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "bench/src/experiments/minimal-get-server.mts"], {
    cwd: repoRoot,
    env: { ...process.env, DBURL: databaseUrl, PORT: String(port) },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = once(child, "exit");
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/x`)).status) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid ?? 0,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
      return 0;
    },
  } as unknown as ServiceProcess;
});
console.log(rows[0]?.value, rows[0]?.floor);
