import { z } from "@hono/zod-openapi";
import { errorResponse } from "../records.ts";

export const sandboxIdParam = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "0f8fad5bd9cb469fa16570867728950e" }),
});

/** The answers every sandbox command may give besides success. */
export const commandResponses = {
  409: errorResponse("The sandbox is still starting (its conversation is not READY yet)"),
  503: errorResponse("The job queue is unreachable, or the command did not complete in time (it may still)"),
} as const;
