import { z } from "zod";
import { errorCodes } from "../errors.ts";

/** Every error answer: our `error` object, and `detail` for clients written for FastAPI (OpenHands). */
export const errorBodySchema = z
  .object({
    error: z.object({
      code: z.enum(errorCodes).meta({ example: "validation_failed" }),
      message: z.string(),
      details: z.unknown().optional(),
    }),
    detail: z.string().meta({ description: "The message again, for clients written for FastAPI (OpenHands)" }),
  })
  .meta({ id: "Error" });

export type ErrorBody = z.infer<typeof errorBodySchema>;

/** OpenHands' answer to a command: `{"success": true}`. */
export const successSchema = z.object({ success: z.boolean() }).meta({ id: "Success" });
