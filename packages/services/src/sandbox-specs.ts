import { ForbiddenError, NotFoundError, type SandboxSpec, type SandboxSpecImage, ValidationError } from "@tern/core";
import { sandboxSpecsRepository } from "@tern/db";
import type { ServiceDeps } from "./deps.ts";

/** The configuration's sandbox images: SANDBOX_IMAGE (the default spec), then SANDBOX_IMAGES. */
export interface SandboxImagesConfig {
  SANDBOX_IMAGE: string;
  SANDBOX_IMAGES: readonly string[];
}

/**
 * The images the configuration offers for sandboxes: SANDBOX_IMAGE first (the default spec), then
 * SANDBOX_IMAGES, without repeats.
 */
export const offeredImages = (config: SandboxImagesConfig): string[] => [
  ...new Set([config.SANDBOX_IMAGE, ...config.SANDBOX_IMAGES]),
];

/** The specs offered: the configuration's images in order (recorded when first seen), then those admins named. */
export const listSandboxSpecs = (deps: Pick<ServiceDeps, "db">, images: readonly string[]): Promise<SandboxSpec[]> =>
  sandboxSpecsRepository(deps.db).offered(images);

/** Each spec's runtime images, one per engine that made one. */
export const sandboxSpecImages = async (
  deps: Pick<ServiceDeps, "db">,
  specIds: readonly string[],
): Promise<Map<string, SandboxSpecImage[]>> => {
  const out = new Map<string, SandboxSpecImage[]>();
  for (const i of await sandboxSpecsRepository(deps.db).images(specIds)) {
    out.set(i.specId, [...(out.get(i.specId) ?? []), i]);
  }
  return out;
};

/**
 * An image reference as an engine takes one: `[host[:port]/]path[:tag][@digest]`, lower case path,
 * nothing that could be read as an option or a URL.
 */
const IMAGE_REF =
  /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;

export const isImageReference = (id: string): boolean => id.length <= 255 && IMAGE_REF.test(id);

/** An admin names a base image as a spec (its id is the image). */
export const addSandboxSpec = async (
  deps: Pick<ServiceDeps, "db">,
  principal: { userId: string; isAdmin: boolean },
  id: string,
  images: readonly string[],
): Promise<SandboxSpec> => {
  if (!principal.isAdmin) throw new ForbiddenError("only an admin names sandbox specs");
  if (!isImageReference(id)) {
    throw new ValidationError("id: not an image reference", [
      { field: "id", in: "body", message: "an image reference, e.g. python:3.12 or registry.example/team/image:tag" },
    ]);
  }
  await sandboxSpecsRepository(deps.db).add(id, principal.userId);
  const spec = (await listSandboxSpecs(deps, images)).find((s) => s.id === id);
  if (!spec) throw new Error(`sandbox spec ${id} was not recorded`);
  return spec;
};

/** An admin's spec removed; the configuration's cannot be (they go with the configuration). */
export const removeSandboxSpec = async (
  deps: Pick<ServiceDeps, "db">,
  principal: { isAdmin: boolean },
  id: string,
  images: readonly string[],
): Promise<void> => {
  if (!principal.isAdmin) throw new ForbiddenError("only an admin removes sandbox specs");
  if (images.includes(id)) {
    throw new ValidationError("id: a spec of the configuration (SANDBOX_IMAGE, SANDBOX_IMAGES)", [
      { field: "id", in: "path", message: "remove it from SANDBOX_IMAGES instead" },
    ]);
  }
  if (!(await sandboxSpecsRepository(deps.db).remove(id))) throw new NotFoundError("no such sandbox spec");
};

/**
 * The spec a start asks for (`sandbox_spec_id`): null for the default one (none asked, or
 * SANDBOX_IMAGE itself), the id for another offered spec; one not offered is refused.
 */
export const specOfStart = async (
  deps: Pick<ServiceDeps, "db"> & { config?: SandboxImagesConfig },
  specId: string | null | undefined,
  at: "body" | "query",
): Promise<string | null> => {
  if (specId == null || specId === deps.config?.SANDBOX_IMAGE) return null;
  const offered = deps.config ? await listSandboxSpecs(deps, offeredImages(deps.config)) : [];
  if (!offered.some((s) => s.id === specId)) {
    throw new ValidationError("sandbox_spec_id: not a spec of GET /api/v1/sandbox-specs", [
      { field: "sandbox_spec_id", in: at, message: "not a spec of GET /api/v1/sandbox-specs" },
    ]);
  }
  return specId;
};
