/**
 * Experiment (not part of `pnpm bench`): the batch-GET load of the bench against a minimal Hono
 * handler that does the API's two queries (key lookup, conversations) with pg directly, to tell
 * the cost of Postgres round trips from the cost of our code. ONE=1 folds both into one query.
 * Usage: node --import tsx bench/src/experiments/minimal-get.mts
 */
import { freePort } from "@tern/testing";
import { createContext } from "../context.ts";
import { conversationsGetRows } from "../rows/conversations-get.ts";
import { spawnPolledService } from "./polled-service.ts";

const ctx = createContext(false);
const rows = await conversationsGetRows(ctx, async (databaseUrl) => {
  const port = await freePort();
  return spawnPolledService(
    port,
    ["--import", "tsx", "bench/src/experiments/minimal-get-server.mts"],
    { ...process.env, DBURL: databaseUrl, PORT: String(port) },
    async (url) => Boolean((await fetch(`${url}/x`)).status),
  );
});
console.log(rows[0]?.value, rows[0]?.floor);
