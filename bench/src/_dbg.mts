import { createRedisPrefix, createTestDatabase, deleteRedisPrefix, ensureTestSandboxNetwork } from "@tern/testing";
import { createContext } from "./context.ts";
import { startDeployment } from "./starts.ts";

const ctx = createContext(true);
const network = await ensureTestSandboxNetwork(ctx.docker);
const db = await createTestDatabase();
const prefix = createRedisPrefix();
const d = await startDeployment({
  databaseUrl: db.url,
  prefix,
  workers: 1,
  poolSize: Number(process.env.POOL ?? 0),
  env: { SANDBOX_NETWORK: network.name },
});
try {
  for (let i = 0; i < Number(process.env.N ?? 12); i++) {
    const t = Date.now();
    const o = await d.startOne({ title: "x" });
    console.log(
      o.taskId,
      new Date(t).toISOString(),
      Math.round(o.clientMs),
      Math.round(o.serverMs),
      JSON.stringify(o.stageDurations),
    );
    await d.removeContainer(ctx.docker, o.containerName);
    if (process.env.POOL) await new Promise((r) => setTimeout(r, 700));
  }
} finally {
  const out = d.workers[0]?.output() ?? "";
  await d.stop();
  await db.drop();
  await deleteRedisPrefix(prefix);
  (await import("node:fs")).writeFileSync("/tmp/worker-out.log", out);
  (await import("node:fs")).writeFileSync("/tmp/api-out.log", d.api.output());
}
