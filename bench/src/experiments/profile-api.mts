/**
 * Profiling aid (not part of `pnpm bench`): runs the batch GET load against an API started with
 * `--cpu-prof`, then prints the hottest functions of the API process by self time.
 * Usage: node --import tsx bench/src/experiments/profile-api.mts [seconds]
 */

import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { freePort, tenancyLimitsOff } from "@tern/testing";
import { createContext } from "../context.ts";
import { conversationsGetRows } from "../rows/conversations-get.ts";
import { spawnPolledService } from "./polled-service.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const dir = "/tmp/tern-api-prof";
await rm(dir, { recursive: true, force: true });
const ctx = createContext(process.argv.includes("--quick"));
const rows = await conversationsGetRows(ctx, async (databaseUrl, redisPrefix) => {
  const port = await freePort();
  return spawnPolledService(
    port,
    ["--cpu-prof", `--cpu-prof-dir=${dir}`, "--import", "tsx", "apps/api/src/main.ts"],
    {
      ...process.env,
      ...tenancyLimitsOff,
      RATE_LIMIT_PER_MINUTE: "1000000",
      DATABASE_URL: databaseUrl,
      REDIS_PREFIX: redisPrefix,
      PORT: String(port),
      HOST: "127.0.0.1",
    },
    async (url) => (await fetch(`${url}/health`)).ok,
  );
});
process.stdout.write(`${rows.map((r) => `${r.label}: ${r.value.toFixed(0)}`).join("\n")}\n`);
for (const f of await readdir(dir)) {
  const p = JSON.parse(await readFile(join(dir, f), "utf8")) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  p.samples.forEach((id, i) => {
    const n = byId.get(id);
    const dt = p.timeDeltas[i] ?? 0;
    total += dt;
    if (!n) return;
    const key = `${n.callFrame.functionName || "(anon)"} ${n.callFrame.url.replace(/.*node_modules\//, "")}:${n.callFrame.lineNumber}`;
    self.set(key, (self.get(key) ?? 0) + dt);
  });
  const top = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25);
  process.stdout.write(`\n${f} (${(total / 1e6).toFixed(1)} s sampled)\n`);
  for (const [k, v] of top) process.stdout.write(`${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}\n`);
}
