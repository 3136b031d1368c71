import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ImageLabel } from "@tern/sandbox";
import type { BenchContext } from "../../context.ts";
import { createAndStart, removeBenchContainers } from "../../raw-docker.ts";
import { since } from "../../stats.ts";

/** A raw container of the bench (named for its `kind` and the run), created and started on Docker directly. */
const rawContainer = (ctx: BenchContext, kind: string, suffix: string, network: string, image = ctx.image) =>
  createAndStart(ctx.floor, {
    image,
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

/**
 * The image a cold start makes its sandbox from: the empty-workspace image the workers made of the
 * sandbox image (the oldest, as they settle on it), else the sandbox image itself. Looked up after the
 * deployment's first start, which makes it.
 */
export const coldImage = async (ctx: BenchContext): Promise<string> => {
  const made =
    (await ctx.sandboxes.listImages?.({ [ImageLabel.WorkspaceImage]: "1", [ImageLabel.WorkspaceBase]: ctx.image })) ??
    [];
  const baseId = await ctx.sandboxes.imageId?.(ctx.image);
  const mine = made
    .filter((i) => i.labels["tern.workspace_base_id"] === baseId)
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.image.localeCompare(b.image))[0];
  return mine?.image ?? ctx.image;
};

/**
 * One floor sample of a cold start: raw Docker create + start of `image` (ms), what the service's
 * cold start does on the engine (it runs no exec: its image has the empty workspace in it); removed
 * afterwards.
 */
export const rawStartOnce = async (ctx: BenchContext, i: number, network: string, image: string): Promise<number> => {
  const t = performance.now();
  const c = await rawContainer(ctx, "raw", String(i), network, image);
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

const execFileAsync = promisify(execFile);

/** The tree of a clone made on the host, as a tar (what the worker sends into the sandbox). */
const hostClone = async (cloneUrl: string): Promise<Buffer> => {
  const dir = await mkdtemp(join(tmpdir(), "tern-bench-clone-"));
  try {
    await execFileAsync("git", ["clone", "--quiet", cloneUrl, join(dir, "repo")]);
    const tar = await execFileAsync("tar", ["-c", "-f", "-", "-C", join(dir, "repo"), "."], {
      encoding: "buffer",
      maxBuffer: 256 * 1024 * 1024,
    });
    return tar.stdout;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
};

/**
 * One floor sample of a first start with a repository, in the service's order (ms): the clone on the
 * host beside the container's create and start; then one exec that unpacks the tree sent on its stdin
 * and runs the setup script; then the hook's copy and the skills' read, one exec each.
 */
export const rawRepoStartOnce = async (
  ctx: BenchContext,
  i: number,
  network: string,
  cloneUrl: string,
  image: string,
): Promise<number> => {
  const t = performance.now();
  const [c, tree] = await Promise.all([rawContainer(ctx, "rawrepo", String(i), network, image), hostClone(cloneUrl)]);
  const setup = await c.exec(
    [
      "sh",
      "-c",
      "mkdir -p /workspace/repo && tar -x -f - -C /workspace/repo && cd /workspace/repo && sh .openhands/setup.sh",
    ],
    { user: "agent", stdin: tree },
  );
  if (setup.exitCode !== 0) throw new Error(`raw placement and setup exited ${setup.exitCode}: ${setup.output}`);
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
