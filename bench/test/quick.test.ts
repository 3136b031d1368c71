import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot, scaled } from "@tern/testing";
import { afterAll, describe, expect, it } from "vitest";
import type { BenchResult } from "../src/report.ts";

/** Every row `pnpm bench` promises, by id. */
const EXPECTED_ROWS = [
  "ready.pool.p50",
  "ready.pool.p95",
  "ready.pool.p99",
  "ready.burst.p50",
  "ready.burst.p99",
  "ready.burst.hit_rate",
  "ready.burst.pool_size.hit_rate",
  "ready.pool.refilling.p50",
  "ready.pool.refilling.p99",
  "ready.steady.hit_rate",
  "ready.cold.p50",
  "ready.cold.p95",
  "ready.cold.p99",
  "ready.repo.p50",
  "ready.repo.p95",
  "ready.repo.p99",
  "ready.repo_snapshot.p50",
  "ready.repo_snapshot.p95",
  "ready.repo_snapshot.p99",
  "throughput.w1",
  "throughput.w2",
  "overhead.per_start.p50",
  "search.first.p50",
  "search.first.bound",
  "search.first.p99",
  "search.deep.p50",
  "search.deep.bound",
  "search.deep.p99",
  "search.kind.p50",
  "search.kind.bound",
  "search.kind.p99",
  "search.window.p50",
  "search.window.bound",
  "search.window.p99",
  "append.batch1",
  "append.agent",
  "append.agent.write.p99",
  "append.agent64",
  "append.agent64.write.p99",
  "append.batch10",
  "get.conversations.rps",
  "rss.api.idle",
  "rss.api.load",
  "rss.worker.idle",
  "rss.worker.load",
  "stream.delivery.p50",
  "stream.delivery.p99",
  "throughput.engines1",
  "throughput.engines2",
  "storage.quota_root.p50",
  "llm.request.condensed.mean",
  "llm.request.condensed.max",
  "llm.request.condensed.total",
  "terminal.echo.p50",
  "terminal.echo.p99",
  "agent.bash.p50",
  "agent.bash.p99",
];

const outs: string[] = [];

afterAll(async () => {
  await Promise.all(outs.map((out) => rm(out, { recursive: true, force: true })));
});

const TIMEOUT_MS = scaled(480_000);

/** The quick bench, ended at `deadlineMs` if still running, so a slow run fails showing its output. */
const runQuick = (out: string, deadlineMs: number) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn("pnpm", ["--silent", "bench", "--quick", "--out", out], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
      // Its own process group, so the deadline stops pnpm, its shell and the bench together.
      detached: true,
    });
    let output = "";
    const deadline = setTimeout(() => {
      output += `\n[quick.test] still running after ${deadlineMs} ms: stopped\n`;
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

describe("pnpm bench --quick", () => {
  // 480 s: the storage section's raw starts on two engines added most of a minute.
  it("runs every row small, prints the table and writes the results JSON", { timeout: TIMEOUT_MS }, async () => {
    // A directory of this attempt's own: a retry must not find an earlier attempt's results.
    const out = await mkdtemp(join(tmpdir(), "tern-bench-"));
    outs.push(out);
    const { code, output } = await runQuick(out, TIMEOUT_MS - 20_000);
    expect(output, output).not.toMatch(/failed sections/);
    expect(code, output).toBe(0);
    const files = await readdir(out);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z-quick\.json$/);
    const result = JSON.parse(await readFile(join(out, files[0] as string), "utf8")) as BenchResult;
    expect(result.quick).toBe(true);
    expect(result.failures).toEqual([]);
    expect(result.rows.map((r) => r.id).sort()).toEqual([...EXPECTED_ROWS].sort());
    for (const r of result.rows) {
      // Each row measured something; where it has a floor, that was measured too, and the ratio follows.
      expect(Number.isFinite(r.value) && r.value > 0, r.id).toBe(true);
      if (r.floor !== null) {
        expect(r.floor > 0, r.id).toBe(true);
        expect(r.ratio, r.id).not.toBeNull();
      }
      expect(output).toContain(r.label);
    }
  });
});
