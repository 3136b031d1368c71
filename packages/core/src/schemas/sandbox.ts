import { z } from "zod";
import { sandboxStatuses } from "../domain.ts";
import { datetimeSchema, hexIdSchema } from "./formats.ts";

const sandboxStatusSchema = z.enum(sandboxStatuses);

/** OpenHands' ExposedUrl: a port of the sandbox reachable from outside. */
export const exposedUrlSchema = z
  .object({ name: z.string(), url: z.string(), port: z.number().int() })
  .meta({ id: "ExposedUrl" });

/** A sandbox as clients see it, shaped as OpenHands' SandboxInfo. */
export const sandboxRecordSchema = z
  .object({
    id: hexIdSchema,
    created_by_user_id: hexIdSchema.nullable(),
    sandbox_spec_id: z.string().meta({ description: "The image it runs (an id of GET /api/v1/sandbox-specs)" }),
    status: sandboxStatusSchema,
    session_api_key: z
      .string()
      .nullable()
      .meta({ description: "Its conversation's session key while RUNNING; null otherwise (as OpenHands)" }),
    exposed_urls: z
      .array(exposedUrlSchema)
      .nullable()
      .meta({ description: "Null unless RUNNING. Sandboxes publish no ports here, so it is empty then" }),
    created_at: datetimeSchema,
  })
  .meta({ id: "SandboxInfo" });

export type SandboxRecord = z.infer<typeof sandboxRecordSchema>;

/** An engine's runtime image of a spec. */
export const sandboxSpecImageRecordSchema = z
  .object({
    engine_id: z.string(),
    state: z.enum(["building", "ready", "failed"]),
    image: z.string().nullable().meta({ description: "The engine's image, once built" }),
    error: z.string().nullable().meta({ description: "Why the build failed, naming the step" }),
    log: z.string().meta({ description: "The build's log (its end)" }),
    updated_at: datetimeSchema,
  })
  .meta({ id: "SandboxSpecRuntimeImage" });

/** An image this deployment offers, shaped as OpenHands' SandboxSpecInfo. */
export const sandboxSpecRecordSchema = z
  .object({
    id: z.string().meta({ description: "The image", example: "tern-sandbox:latest" }),
    command: z.array(z.string()).nullable().meta({ description: "Null: the image's own command" }),
    created_at: datetimeSchema.meta({ description: "When this deployment first offered it" }),
    initial_env: z.record(z.string(), z.string()),
    working_dir: z.string(),
    added_by_admin: z.boolean().meta({
      description:
        "tern extension: named by an admin (POST /api/v1/sandbox-specs); false: an image of the configuration",
    }),
    runtime_images: z.array(sandboxSpecImageRecordSchema).meta({
      description:
        "tern extension: the image each engine made of this spec (its base image with tern's tools, the sandbox " +
        "user and the workspace), built by the spec's first start there; none yet: no start has needed it. The " +
        "default spec (SANDBOX_IMAGE) runs as it is and has none",
    }),
  })
  .meta({ id: "SandboxSpecInfo" });

/** A body of POST /api/v1/sandbox-specs. */
export const sandboxSpecCreateSchema = z
  .object({
    id: z
      .string()
      .min(1)
      .max(255)
      .meta({ description: "The base image (any image on the engines)", example: "python:3.12" }),
  })
  .meta({ id: "SandboxSpecCreate" });

export type SandboxSpecRecord = z.infer<typeof sandboxSpecRecordSchema>;
