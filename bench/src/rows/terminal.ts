import { randomUUID } from "node:crypto";
import { runTerminal } from "@tern/agent";
import { SandboxLabel } from "@tern/sandbox";
import type { BenchContext } from "../context.ts";
import { BENCH_LABEL } from "../raw-docker.ts";
import { type BenchRow, row } from "../report.ts";
import { summarize, tailKeys, tailText } from "../stats.ts";

/**
 * The `terminal` tool's round trip: `echo` in the conversation's live shell (one exec of the
 * controller, keys to tmux, the prompt back, the screen read), against a bare `docker exec` of
 * `echo` on the same sandbox, in turns, so both see the same load.
 */
export const terminalRows = async (ctx: BenchContext): Promise<BenchRow[]> => {
  // 200 for a p99 (P99_MIN_SAMPLES); the gate compares p50s.
  const samples = ctx.gate ? 20 : ctx.quick ? 12 : 200;
  const sandbox = await ctx.sandboxes.create({
    name: `tern-bench-terminal-${ctx.runId}`,
    image: ctx.image,
    labels: { [SandboxLabel.Marker]: "1", [BENCH_LABEL]: ctx.runId },
    limits: { memoryMb: 512, cpus: 1, pids: 256 },
  });
  try {
    const call = (command: string) =>
      runTerminal(
        { command },
        {
          sandbox: ctx.sandboxes,
          sandboxRef: sandbox.ref,
          workspaceDir: "/workspace",
          actionId: randomUUID(),
          maxOutputBytes: 30_000,
        },
      );
    const bare = () => ctx.sandboxes.exec(sandbox.ref, { cmd: ["echo", "hi"] });
    // The shell starts with the first call; a few of each warm both paths.
    for (let i = 0; i < 5; i++) {
      await call("echo warm");
      await bare();
    }
    const terminal: number[] = [];
    const exec: number[] = [];
    for (let i = 0; i < samples; i++) {
      let began = performance.now();
      const out = await call(`echo hi-${i}`);
      terminal.push(performance.now() - began);
      if (!out.text.startsWith(`hi-${i}\n`)) throw new Error(`terminal echo answered: ${out.text.slice(0, 200)}`);
      began = performance.now();
      const r = await bare();
      exec.push(performance.now() - began);
      if (r.stdout !== "hi\n") throw new Error(`docker exec echo answered: ${r.stdout}`);
    }
    const t = summarize(terminal);
    const e = summarize(exec);
    ctx.progress(
      `terminal echo: p50 ${t.p50.toFixed(1)} ms, ${tailText(t)}; ` +
        `bare docker exec: p50 ${e.p50.toFixed(1)} ms, ${tailText(e)}`,
    );
    return (["p50", ...tailKeys(t, false)] as const).map((p) =>
      row({
        id: `terminal.echo.${p}`,
        label: `terminal tool round trip (echo) ${p}`,
        unit: "ms",
        value: t[p],
        floor: e[p],
        floorLabel: "bare docker exec",
        // A single sample (the maximum) carries no target.
        ...(p === "max" ? {} : { maxRatio: 1.5 }),
        detail: { terminal: t, exec: e, samples },
      }),
    );
  } finally {
    await ctx.sandboxes.destroy(sandbox.ref);
  }
};
