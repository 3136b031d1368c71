import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot, scaled } from "@tern/testing";
import { afterAll, describe, expect, it } from "vitest";
import { formatVerdicts, GATE_TOLERANCE, GATED_ROWS, judgeGate } from "../src/gate.ts";
import type { BenchResult } from "../src/report.ts";

const outs: string[] = [];

afterAll(async () => {
  await Promise.all(outs.map((out) => rm(out, { recursive: true, force: true })));
});

const TIMEOUT_MS = scaled(240_000);

/** `pnpm bench --gate`, ended at `deadlineMs` if still running, so a slow run fails showing its output. */
const runGate = (out: string, deadlineMs: number) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn("pnpm", ["--silent", "bench", "--gate", "--out", out], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
      // Its own process group, so the deadline stops pnpm, its shell and the bench together.
      detached: true,
    });
    let output = "";
    const deadline = setTimeout(() => {
      output += `\n[gate.test] still running after ${deadlineMs} ms: stopped\n`;
      process.kill(-(child.pid as number), "SIGTERM");
    }, deadlineMs);
    child.on("exit", () => clearTimeout(deadline));
    child.stdout.on("data", (d) => {
      output += d;
    });
    child.stderr.on("data", (d) => {
      output += d;
    });
    child.on("exit", (code) => resolve({ code, output }));
  });

describe("CI speed gate (pnpm bench --gate)", () => {
  it(`every gated ratio is within ${GATE_TOLERANCE * 100} % of its target, measured beside its floor in one run`, {
    timeout: TIMEOUT_MS,
  }, async () => {
    const out = await mkdtemp(join(tmpdir(), "tern-bench-gate-"));
    outs.push(out);
    const { code, output } = await runGate(out, TIMEOUT_MS - 20_000);
    expect(output, output).not.toMatch(/failed sections/);
    expect(code, output).toBe(0);
    const files = await readdir(out);
    expect(files).toHaveLength(1);
    const result = JSON.parse(await readFile(join(out, files[0] as string), "utf8")) as BenchResult;
    expect(result.gate).toBe(true);
    const verdicts = judgeGate(result);
    expect(verdicts.map((v) => v.id)).toEqual(GATED_ROWS.map((g) => g.id));
    const load = result.machine.load;
    const report = `${formatVerdicts(verdicts)}\nload average ${load ? `${load.min.toFixed(1)}-${load.max.toFixed(1)}` : "?"}`;
    expect(
      verdicts.filter((v) => !v.ok).map((v) => v.id),
      report,
    ).toEqual([]);
  });
});
