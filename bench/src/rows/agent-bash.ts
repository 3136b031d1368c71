import { createDb } from "@tern/db";
import {
  createRedisPrefix,
  createSandboxedConversation,
  createTestDatabase,
  deleteRedisPrefix,
  removeSandboxesOfNamespace,
} from "@tern/testing";
import type { BenchContext } from "../context.ts";
import { type BenchRow, row } from "../report.ts";
import { createKey, spawnApi, spawnWorker } from "../services.ts";
import { summarize, tailKeys, tailText } from "../stats.ts";

/**
 * A bash command's round trip through the agent-server API:
 * `POST {api}/agent/{sandbox}/api/bash/execute_bash_command` on the real API process, which
 * stores the command, has the real worker process run it in the sandbox (`docker exec`), stores its
 * output and answers the last BashOutput. Against a bare `docker exec` of `echo` on the same
 * sandbox, in turns, so both see the same load. The caller is the sandbox owner's API key in
 * `X-Session-API-Key` (the agent server's header; an owner's key is taken as the session key is).
 */
export const agentBashRows = async (ctx: BenchContext): Promise<BenchRow[]> => {
  // 200 for a p99 (P99_MIN_SAMPLES); the gate compares p50s.
  const samples = ctx.gate ? 20 : ctx.quick ? 12 : 200;
  const database = await createTestDatabase();
  const prefix = createRedisPrefix();
  const api = await spawnApi(database.url, prefix, { RATE_LIMIT_PER_MINUTE: "0" });
  const worker = await spawnWorker(database.url, prefix, { SANDBOX_POOL_SIZE: "0" }).catch(async (err) => {
    await api.stop();
    throw err;
  });
  const { db, close } = createDb(database.url, { max: 2 });
  try {
    const { key, userId } = await createKey(database.url);
    const { conversationId, sandboxRef } = await createSandboxedConversation({
      db,
      sandboxes: ctx.sandboxes,
      namespace: prefix,
      userId,
      tools: [],
    });
    const found = await database.pool.query<{ id: string }>(`select id from sandboxes where conversation_id = $1`, [
      conversationId,
    ]);
    const sandboxId = (found.rows[0]?.id ?? "").replaceAll("-", "");
    const url = `${api.url}/agent/${sandboxId}/api/bash/execute_bash_command`;
    const call = async (command: string) => {
      const res = await fetch(url, {
        method: "POST",
        headers: { "x-session-api-key": key, "content-type": "application/json" },
        body: JSON.stringify({ command }),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`execute_bash_command answered ${res.status}: ${text.slice(0, 300)}`);
      return JSON.parse(text) as { stdout: string | null; exit_code: number | null };
    };
    const bare = () => ctx.sandboxes.exec(sandboxRef, { cmd: ["echo", "hi"] });
    for (let i = 0; i < 5; i++) {
      await call("echo warm");
      await bare();
    }
    const viaApi: number[] = [];
    const exec: number[] = [];
    for (let i = 0; i < samples; i++) {
      let began = performance.now();
      const out = await call(`echo hi-${i}`);
      viaApi.push(performance.now() - began);
      if (out.stdout !== `hi-${i}\n` || out.exit_code !== 0) {
        throw new Error(`execute_bash_command echo answered: ${JSON.stringify(out).slice(0, 200)}`);
      }
      began = performance.now();
      const r = await bare();
      exec.push(performance.now() - began);
      if (r.stdout !== "hi\n") throw new Error(`docker exec echo answered: ${r.stdout}`);
    }
    const a = summarize(viaApi);
    const e = summarize(exec);
    ctx.progress(
      `agent-server bash: p50 ${a.p50.toFixed(1)} ms, ${tailText(a)}; ` +
        `bare docker exec: p50 ${e.p50.toFixed(1)} ms, ${tailText(e)}`,
    );
    return (["p50", ...tailKeys(a, false)] as const).map((p) =>
      row({
        id: `agent.bash.${p}`,
        label: `bash round trip via /api/bash/execute_bash_command ${p}`,
        unit: "ms",
        value: a[p],
        floor: e[p],
        floorLabel: "bare docker exec",
        // A single sample (the maximum) carries no target.
        ...(p === "max" ? {} : { maxRatio: 1.5 }),
        detail: { api: a, exec: e, samples },
      }),
    );
  } finally {
    await close();
    await Promise.all([api.stop(), worker.stop()]);
    await removeSandboxesOfNamespace(prefix).catch(() => undefined);
    await database.drop();
    await deleteRedisPrefix(prefix);
  }
};
