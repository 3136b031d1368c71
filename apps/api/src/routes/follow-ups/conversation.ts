import { z } from "@hono/zod-openapi";
import { successSchema } from "@tern/core";
import { errorResponse } from "../records.ts";

export const conversationIdParam = z.object({
  conversation_id: z
    .string()
    .openapi({ param: { name: "conversation_id", in: "path" }, example: "0f8fad5bd9cb469fa16570867728950e" }),
});

// Every follow-up route answers a command with it.
export { successSchema };

export const enqueueFailedResponse = {
  503: errorResponse("The job queue is unreachable; nothing was changed"),
} as const;

export const conflictResponse = (description: string) => ({ 409: errorResponse(description) }) as const;
