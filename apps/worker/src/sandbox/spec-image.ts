import { BadRequestError, type StartRequest } from "@tern/core";
import { sandboxSpecsRepository, startTasksRepository } from "@tern/db";
import { RuntimeImageError, RuntimeImageLabel, SandboxLabel } from "@tern/sandbox";
import { listSandboxSpecs, offeredImages } from "@tern/services";
import type { StartContext } from "../pipeline/context.ts";

/**
 * The spec a start runs: a conversation's `sandbox_spec_id`, or the image the API wrote on a
 * sandbox's own row (POST /api/v1/sandboxes); null for the default spec (SANDBOX_IMAGE), which runs
 * as it is (warm sandboxes, the empty-workspace image and snapshots are of it only).
 */
export const specOfStartTask = (
  ctx: Pick<StartContext, "deps" | "task">,
  rowImage: string | null | undefined,
): string | null => {
  const asked =
    ctx.task.kind === "sandbox" ? rowImage : ((ctx.task.request as StartRequest).sandbox_spec_id ?? undefined);
  return asked && asked !== ctx.deps.config.SANDBOX_IMAGE ? asked : null;
};

/** Builds under way in this worker, by spec: two starts of one spec wait on one build. */
const building = new Map<string, Promise<string>>();

/** The start's detail while its image is prepared. */
const preparingImageDetail = (spec: string) => `preparing image ${spec} …`;

/**
 * A stage of WAITING_FOR_SANDBOX for a spec other than the default: the spec's runtime image on this
 * engine, built when this engine has none of its base image's digest and the tools' version (the
 * start's detail says "preparing image …" meanwhile), found otherwise. The build's log and its state
 * are recorded for GET /api/v1/sandbox-specs; a failure names its step and ends the start.
 */
export const runtimeImageOfSpec = async (ctx: StartContext, spec: string): Promise<string> => {
  const { deps, task } = ctx;
  const prepare = deps.sandboxes.prepareRuntimeImage?.bind(deps.sandboxes);
  if (!prepare) throw new BadRequestError(`sandbox spec ${spec}: this sandbox driver runs the default spec only`);
  const tasks = startTasksRepository(deps.db);
  const specs = sandboxSpecsRepository(deps.db);
  const engine = deps.engineId ?? "";
  const lines: string[] = [];
  let noted = false;
  const options = {
    toolsFrom: deps.config.SANDBOX_IMAGE,
    labels: {
      [RuntimeImageLabel.Spec]: spec,
      [SandboxLabel.Namespace]: deps.config.REDIS_PREFIX,
    },
    log: (line: string) => {
      lines.push(`${new Date().toISOString()} ${line}`);
      // The first step of a build (not of a lookup that finds the image): the start says so, once.
      if (!noted && line.startsWith("building ")) {
        noted = true;
        void tasks.setDetail(task.id, ctx.attempt, preparingImageDetail(spec)).catch(() => undefined);
        void specs.recordImage(spec, engine, { state: "building", log: lines.join("\n") }).catch(() => undefined);
      }
    },
  };
  const build = async (): Promise<string> => {
    try {
      const made = await prepare(spec, options);
      if (made.built || noted) {
        ctx.log.info({ spec, image: made.image }, "runtime image of the spec built");
      }
      await specs.recordImage(spec, engine, {
        state: "ready",
        image: made.image,
        baseId: made.baseId,
        toolsVersion: made.toolsVersion,
        ...(made.built ? { log: lines.join("\n") } : { log: (await specLog(ctx, spec)) ?? "" }),
      });
      return made.image;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      await specs
        .recordImage(spec, engine, { state: "failed", log: lines.join("\n"), error: message })
        .catch(() => undefined);
      // The image's fault (missing, unreadable) or a step that failed: the same start fails the same way.
      if (err instanceof RuntimeImageError) throw new BadRequestError(message);
      throw err;
    } finally {
      if (noted) await tasks.setDetail(task.id, ctx.attempt, null).catch(() => undefined);
    }
  };
  const running = building.get(spec);
  if (running) return running;
  const started = build().finally(() => building.delete(spec));
  building.set(spec, started);
  return started;
};

/** The log an earlier build left (a lookup that found the image keeps it). */
const specLog = async (ctx: StartContext, spec: string): Promise<string | null> => {
  const found = await sandboxSpecsRepository(ctx.deps.db).images([spec]);
  return found.find((i) => i.engineId === (ctx.deps.engineId ?? ""))?.log ?? null;
};

/**
 * The janitor's: this engine's runtime images of specs no longer offered (an admin removed the spec,
 * or the configuration dropped it) are removed, and forgotten; one a sandbox still runs from stays
 * until a later sweep. Returns the images removed.
 */
export const removeRuntimeImagesOfSpecsGone = async (
  deps: Pick<StartContext["deps"], "db" | "sandboxes" | "config" | "engineId">,
): Promise<string[]> => {
  const { sandboxes, config } = deps;
  if (!sandboxes.listImages || !sandboxes.removeImage) return [];
  const images = await sandboxes.listImages({ [SandboxLabel.Namespace]: config.REDIS_PREFIX });
  const ofSpecs = images.filter((i) => i.labels[RuntimeImageLabel.Spec]);
  if (ofSpecs.length === 0) return [];
  const offered = new Set((await listSandboxSpecs(deps, offeredImages(config))).map((s) => s.id));
  const removed: string[] = [];
  for (const i of ofSpecs) {
    const spec = i.labels[RuntimeImageLabel.Spec] as string;
    if (offered.has(spec)) continue;
    await sandboxes.removeImage(i.image);
    if ((await sandboxes.imageId?.(i.image)) === null) {
      removed.push(i.image);
      await sandboxSpecsRepository(deps.db).forgetImage(spec, deps.engineId ?? "");
    }
  }
  return removed;
};
