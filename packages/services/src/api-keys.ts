import { type ApiKey, generateApiKey, NotFoundError, parseId, parseIsoTimestamp, ValidationError } from "@tern/core";
import { apiKeysRepository, usersRepository } from "@tern/db";
import type { CredentialEvents, KeyDeps } from "./deps.ts";
import { assertKeyAllowed } from "./quotas.ts";
import { inTransaction } from "./transaction.ts";

const DAY_MS = 86_400_000;

// The same shape as a request body's schema failures: a message naming the field, and details.
const invalidExpiry = (message: string) =>
  new ValidationError(`expires_at: ${message}`, [{ field: "expires_at", in: "json", message }]);

/**
 * The expiry of a new key: an ISO 8601 time (no zone means UTC), in the future and at most
 * `maxDays` ahead. Returns it normalised for Postgres; `maxDays` ahead when none was asked for.
 */
export const keyExpiry = (raw: string | null | undefined, maxDays: number, now: number = Date.now()): string => {
  // No key lives for ever: without an expiry asked for, the lifetime cap is the expiry.
  if (raw == null) return new Date(now + maxDays * DAY_MS).toISOString();
  const parsed = parseIsoTimestamp(raw);
  if (!parsed) throw invalidExpiry("not an ISO 8601 timestamp");
  if (parsed.epochMs <= now) throw invalidExpiry("must be in the future");
  if (parsed.epochMs > now + maxDays * DAY_MS) throw invalidExpiry(`at most ${maxDays} days ahead`);
  return parsed.text;
};

export interface NewApiKey {
  name?: string | null;
  /** ISO 8601; refused past the lifetime cap. None: it expires at the cap (API_KEY_MAX_LIFETIME_DAYS). */
  expiresAt?: string | null;
}

export interface IssuedApiKey {
  apiKey: ApiKey;
  /** The key itself: only its hash is stored, so this is the one time it is seen. */
  key: string;
}

/**
 * A new key of `userId`. ValidationError when its expiry is past, malformed or beyond the cap;
 * QuotaExceededError when the user holds `maxKeysPerUser` live keys already (checked and
 * inserted in one transaction, serialised per user).
 */
export const issueApiKey = async (deps: KeyDeps, userId: string, input: NewApiKey = {}): Promise<IssuedApiKey> => {
  const expiresAt = keyExpiry(input.expiresAt, deps.maxKeyLifetimeDays);
  const generated = generateApiKey();
  const apiKey = await inTransaction(deps.db, async (trx) => {
    await assertKeyAllowed(trx, userId, deps.maxKeysPerUser);
    return apiKeysRepository(trx).create({
      userId,
      name: input.name ?? null,
      prefix: generated.prefix,
      hash: generated.hash,
      expiresAt,
    });
  });
  return { apiKey, key: generated.key };
};

/** The user's live keys (never their secrets), newest first. */
export const listApiKeys = (deps: Pick<KeyDeps, "db">, userId: string): Promise<ApiKey[]> =>
  apiKeysRepository(deps.db).listForUser(userId);

/**
 * Revokes one of the user's keys; it is refused from the next request on, on every API replica
 * (`credentialEvents` tells their key caches). Returns its id; NotFoundError for a malformed or
 * unknown id, another user's key, or one already revoked.
 */
export const revokeApiKey = async (
  deps: Pick<KeyDeps, "db"> & { credentialEvents?: CredentialEvents | undefined },
  userId: string,
  rawId: string,
): Promise<string> => {
  const id = parseId(rawId);
  if (id === null || !(await apiKeysRepository(deps.db).revoke(userId, id))) {
    throw new NotFoundError("No such API key");
  }
  await deps.credentialEvents?.publish({ keyId: id });
  return id;
};

/** A new user (an operator with `admin`; `userName` labels it) with one key: both rows or neither. */
export const createUserWithKey = async (
  deps: KeyDeps,
  input: NewApiKey & { admin?: boolean; userName?: string | null } = {},
): Promise<IssuedApiKey & { userId: string }> => {
  return deps.db.transaction().execute(async (trx) => {
    const user = await usersRepository(trx).create({ isAdmin: input.admin ?? false, name: input.userName ?? null });
    const issued = await issueApiKey({ db: trx, maxKeyLifetimeDays: deps.maxKeyLifetimeDays }, user.id, input);
    return { userId: user.id, ...issued };
  });
};
