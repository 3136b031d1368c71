import { randomBytes } from "node:crypto";
import { ImageLabel, SandboxLabel } from "@tern/sandbox";
import { sandboxLimitsOf, type WorkerConfig } from "../config.ts";
import type { WorkerDeps } from "../deps.ts";
import { emptyWorkspaceWarmUp } from "../pipeline/prepare-repository.ts";

/** How often the sandbox image's id is looked at again (a tag built anew gets a new image made). */
const RECHECK_EVERY_MS = 60_000;
/** After a failed build, the next try waits this long (the starts meanwhile run the warm-up exec). */
const RETRY_AFTER_MS = 30_000;

interface ImageState {
  /** The deps of the first call (the processor's own, not one start's timed ones): what builds and checks run with. */
  deps: WorkerDeps;
  /** The image to create empty-workspace sandboxes from, once made or found. */
  image: string | null;
  checkedAt: number;
  pending: Promise<void> | null;
}

/** Per worker (its config: one engine, one sandbox image); every start of the worker shares its image. */
const states = new WeakMap<WorkerConfig, ImageState>();

const usable = (deps: WorkerDeps): boolean =>
  // An image `commit` made lives on the engine that made it: only drivers with affinity keep it
  // where every sandbox of this worker is made (as repository snapshots).
  deps.engineId !== null &&
  typeof deps.sandboxes.commit === "function" &&
  typeof deps.sandboxes.listImages === "function" &&
  typeof deps.sandboxes.imageId === "function";

/**
 * SANDBOX_IMAGE with the empty workspace (git init, the identity) made in it, as the warm pool makes it
 * in each warm sandbox: a cold start without a repository creates from it and runs no exec at all
 * (each costs tens of ms of the engine's time). Made once per engine and sandbox image (its id), by
 * whichever worker needs it first, and found by its labels by the others; shared by every deployment on
 * the engine, as the sandbox image is. Returns null until it exists (the start then makes the workspace
 * with one exec) and starts making it in the background; never fails a start.
 */
export const emptyWorkspaceImage = (deps: WorkerDeps): string | null => {
  if (!usable(deps)) return null;
  let state = states.get(deps.config);
  if (!state) {
    state = { deps, image: null, checkedAt: 0, pending: null };
    states.set(deps.config, state);
  }
  const due = Date.now() - state.checkedAt > (state.image ? RECHECK_EVERY_MS : RETRY_AFTER_MS);
  if (due && !state.pending) {
    const s = state;
    s.pending = refresh(s)
      .catch((err: unknown) => {
        s.image = null;
        s.deps.logger.warn({ err }, "empty-workspace image not made; cold starts make their workspace with an exec");
      })
      .finally(() => {
        s.checkedAt = Date.now();
        s.pending = null;
      });
  }
  return state.image;
};

/** A create from `image` failed (it was removed underneath): the next starts use the sandbox image. */
export const forgetEmptyWorkspaceImage = (deps: WorkerDeps, image: string): void => {
  const state = states.get(deps.config);
  if (state?.image === image) {
    state.image = null;
    state.checkedAt = 0;
  }
};

/** For tests: waits for a build or check under way. */
export const emptyWorkspaceImageSettled = async (deps: WorkerDeps): Promise<void> => {
  await states.get(deps.config)?.pending;
};

const refresh = async (state: ImageState): Promise<void> => {
  const { deps } = state;
  const { sandboxes, config } = deps;
  const base = config.SANDBOX_IMAGE;
  const baseId = await sandboxes.imageId!(base);
  if (!baseId) throw new Error(`the sandbox image ${base} is not on the engine`);
  const made = await sandboxes.listImages!({ [ImageLabel.WorkspaceImage]: "1", [ImageLabel.WorkspaceBase]: base });
  // The oldest of this base's id: workers that made one each at once all settle on the same.
  const mine = made
    .filter((i) => i.labels[ImageLabel.WorkspaceBaseId] === baseId)
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.image.localeCompare(b.image))[0];
  if (mine) {
    state.image = mine.image;
    return;
  }
  state.image = await build(deps, baseId);
  // Images of an earlier build of the same tag would keep its layers on the disk: removed (one a
  // sandbox still runs from stays until a later build).
  for (const old of made) {
    if (old.labels[ImageLabel.WorkspaceBaseId] !== baseId) await sandboxes.removeImage?.(old.image);
  }
};

/** A sandbox of SANDBOX_IMAGE, the warm-up exec run in it, committed; the sandbox removed. */
const build = async (deps: WorkerDeps, baseId: string): Promise<string> => {
  const { sandboxes, config } = deps;
  const started = Date.now();
  // Labelled as every sandbox of this deployment: left behind by a crash, the janitor removes it.
  const info = await sandboxes.create({
    name: `tern-workspace-image-${randomBytes(6).toString("hex")}`,
    image: config.SANDBOX_IMAGE,
    labels: {
      [SandboxLabel.Marker]: "1",
      [SandboxLabel.Namespace]: config.REDIS_PREFIX,
      ...(deps.engineId ? { [SandboxLabel.Engine]: deps.engineId } : {}),
    },
    limits: sandboxLimitsOf(config),
  });
  try {
    const r = await sandboxes.exec(info.ref, emptyWorkspaceWarmUp());
    if (r.exitCode !== 0) throw new Error(`the empty workspace's warm-up exited ${r.exitCode}: ${r.stderr.trim()}`);
    const made = await sandboxes.commit!(info.ref, {
      baseImage: config.SANDBOX_IMAGE,
      labels: {
        [ImageLabel.WorkspaceImage]: "1",
        [ImageLabel.WorkspaceBase]: config.SANDBOX_IMAGE,
        [ImageLabel.WorkspaceBaseId]: baseId,
      },
    });
    deps.logger.info(
      { image: made.image, base: config.SANDBOX_IMAGE, ms: Date.now() - started },
      "empty-workspace image made",
    );
    return made.image;
  } finally {
    await sandboxes.destroy(info.ref);
  }
};
