import { z } from "zod";

/**
 * Field formats of every record (DESIGN, API contracts): ids as 32 hex characters, datetimes as
 * ISO 8601 UTC ending in Z. The `.meta()` here and on each schema is what the OpenAPI document
 * shows (zod-to-openapi reads zod's own metadata; `id` names a component).
 */
export const hexIdSchema = z
  .string()
  .regex(/^[0-9a-f]{32}$/)
  .meta({ example: "0f8fad5bd9cb469fa16570867728950e" });

/** Whether `v` parses as a URL whose scheme is one of `protocols` (as `new URL` names them: "https:"). */
export const hasUrlScheme = (v: string, protocols: readonly string[]): boolean => {
  try {
    return protocols.includes(new URL(v).protocol);
  } catch {
    return false;
  }
};

export const datetimeSchema = z.string().meta({ format: "date-time", example: "2026-11-22T21:11:34.123456Z" });
