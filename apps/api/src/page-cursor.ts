import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { BadRequestError } from "@tern/core";
import { type Database, deploymentSecretsRepository } from "@tern/db";
import type { Kysely } from "kysely";
import type { z } from "zod";

/**
 * Opaque keyset cursors for `page_id`: the position of the last item of a page, base64url JSON,
 * with an HMAC over it and over the search it belongs to (`scope`: resource, filters, order). A
 * cursor that was forged, altered, or taken from another search fails the check and is a 400.
 */
/**
 * The cursors' HMAC secret: CURSOR_SECRET when configured, else a random one generated once and
 * kept in Postgres (deployment_secrets), so every API replica of the deployment signs alike and no
 * one can derive it from anything they know.
 */
export const resolveCursorSecret = async (db: Kysely<Database>, configured: string | undefined): Promise<string> =>
  configured ??
  (await deploymentSecretsRepository(db).getOrCreate("cursor_secret", () => randomBytes(32).toString("base64url")));

const mac = (secret: string, scope: string, body: string): Buffer =>
  createHmac("sha256", secret).update(scope).update("\n").update(body).digest();

export const encodePageCursor = (secret: string, scope: string, position: unknown): string => {
  const body = Buffer.from(JSON.stringify(position)).toString("base64url");
  return `${body}.${mac(secret, scope, body).toString("base64url")}`;
};

export const decodePageCursor = <T>(secret: string, scope: string, cursor: string, schema: z.ZodType<T>): T => {
  const invalid = new BadRequestError("page_id: not a page_id this search returned");
  const [body, signature, ...rest] = cursor.split(".");
  if (!body || !signature || rest.length > 0) throw invalid;
  const expected = mac(secret, scope, body);
  const given = Buffer.from(signature, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
  } catch {
    throw invalid;
  }
  const result = schema.safeParse(parsed);
  if (!result.success) throw invalid;
  return result.data;
};
