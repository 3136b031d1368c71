import type { BenchContext } from "../../context.ts";
import { createAndStart, removeBenchContainers } from "../../raw-docker.ts";
import { since } from "../../stats.ts";

/** A raw container of the bench (named for its `kind` and the run), created and started on Docker directly. */
const rawContainer = (ctx: BenchContext, kind: string, suffix: string, network: string) =>
  createAndStart(ctx.floor, {
    image: ctx.image,
    name: `tern-bench-${kind}-${ctx.runId}-${suffix}`,
    runId: ctx.runId,
    network,
  });

/** A raw container that ran one `true` as the agent: a plain start's create + start + first exec. */
const rawStartedContainer = async (ctx: BenchContext, kind: string, suffix: string, network: string) => {
  const c = await rawContainer(ctx, kind, suffix, network);
  const r = await c.exec(["true"], { user: "agent" });
  if (r.exitCode !== 0) throw new Error(`raw exec exited ${r.exitCode}`);
  return c;
};

/** One floor sample of a plain start: raw Docker create + start + one exec (ms); removed afterwards. */
export const rawStartOnce = async (ctx: BenchContext, i: number, network: string): Promise<number> => {
  const t = performance.now();
  const c = await rawStartedContainer(ctx, "raw", String(i), network);
  const ms = since(t);
  await c.remove();
  return ms;
};

/**
 * Floor of start throughput: raw create + start + one exec, `parallel` at a time. Gives the span
 * (ms) from the first create to the last exec, as the service's burst is timed.
 */
export const rawThroughput = async (
  ctx: BenchContext,
  n: number,
  parallel: number,
  network: string,
  round: number,
): Promise<number> => {
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < n) {
        const i = next++;
        await rawStartedContainer(ctx, "par", `${round}-${i}`, network);
      }
    }),
  );
  const spanMs = since(t);
  await removeBenchContainers(ctx.sandboxes, ctx.runId);
  return spanMs;
};

/**
 * One floor sample of a start with a repository: raw container + git clone + sh setup.sh + the hook's copy and
 * the skills' read, on Docker directly (ms).
 */
export const rawRepoStartOnce = async (
  ctx: BenchContext,
  i: number,
  network: string,
  cloneUrl: string,
): Promise<number> => {
  const t = performance.now();
  const c = await rawContainer(ctx, "rawrepo", String(i), network);
  const clone = await c.exec(["git", "clone", "--quiet", cloneUrl, "/workspace/repo"], { user: "agent" });
  if (clone.exitCode !== 0) throw new Error(`raw clone exited ${clone.exitCode}: ${clone.output}`);
  const setup = await c.exec(["sh", ".openhands/setup.sh"], { user: "agent", cwd: "/workspace/repo" });
  if (setup.exitCode !== 0) throw new Error(`raw setup exited ${setup.exitCode}: ${setup.output}`);
  // The service's hook and skill stages are one exec each: so are the floor's.
  const hook = await c.exec(["cp", ".openhands/pre-commit.sh", ".git/hooks/pre-commit"], {
    user: "agent",
    cwd: "/workspace/repo",
  });
  if (hook.exitCode !== 0) throw new Error(`raw hook install exited ${hook.exitCode}: ${hook.output}`);
  const skills = await c.exec(["cat", "AGENTS.md", ".openhands/skills/testing.md"], {
    user: "agent",
    cwd: "/workspace/repo",
  });
  if (skills.exitCode !== 0) throw new Error(`raw skill read exited ${skills.exitCode}: ${skills.output}`);
  const ms = since(t);
  await c.remove();
  return ms;
};
