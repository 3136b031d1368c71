import type { SandboxSpec } from "@tern/core";
import { sandboxSpecsRepository } from "@tern/db";
import type { ServiceDeps } from "./deps.ts";

/**
 * The images this deployment offers for sandboxes: SANDBOX_IMAGE first (what new sandboxes run),
 * then SANDBOX_IMAGES, without repeats.
 */
export const offeredImages = (config: { SANDBOX_IMAGE: string; SANDBOX_IMAGES: readonly string[] }): string[] => [
  ...new Set([config.SANDBOX_IMAGE, ...config.SANDBOX_IMAGES]),
];

/** The specs of the offered images, in that order (an image offered first now is recorded now). */
export const listSandboxSpecs = (deps: Pick<ServiceDeps, "db">, images: readonly string[]): Promise<SandboxSpec[]> =>
  sandboxSpecsRepository(deps.db).offered(images);
