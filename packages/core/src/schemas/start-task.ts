import { z } from "zod";
import { startTaskStatuses } from "../domain.ts";
import { datetimeSchema, hexIdSchema } from "./formats.ts";
import { startRequestSchema } from "./start-request.ts";

/** A start task as clients see it, shaped as OpenHands' AppConversationStartTask. */
export const startTaskRecordSchema = z
  .object({
    id: hexIdSchema,
    created_by_user_id: hexIdSchema,
    status: z.enum(startTaskStatuses),
    detail: z.string().nullable(),
    app_conversation_id: hexIdSchema.nullable(),
    sandbox_id: hexIdSchema.nullable(),
    agent_server_url: z.string().nullable(),
    request: startRequestSchema,
    created_at: datetimeSchema,
    updated_at: datetimeSchema,
  })
  .meta({ id: "StartTask" });

export type StartTaskRecord = z.infer<typeof startTaskRecordSchema>;
