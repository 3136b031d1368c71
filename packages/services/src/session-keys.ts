import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { type Conversation, parseId, type Sandbox, toHexId } from "@tern/core";
import { conversationsRepository, type Database, deploymentSecretsRepository, sandboxesRepository } from "@tern/db";
import type { Kysely } from "kysely";
import type { ServiceDeps } from "./deps.ts";

/**
 * What a session key opens. Three kinds of key stand for less than their user's API key:
 * - a conversation's `session_api_key`: OpenHands' agent-server key of that conversation, revoked
 *   when the conversation is deleted;
 * - a sandbox's own key (a sandbox made by POST /api/v1/sandboxes): that sandbox's agent server;
 * - a conversation's read-only key (readOnlyKeyOf), which reads the conversation and does nothing
 *   else: what its owner shares to let someone watch (the conversation page signs it in read-only).
 * Every place that takes a session key (the app routes, the page, a sandbox's settings, the
 * agent-server mount) asks here, then decides what that holder may do. README's "Keys" says it.
 */
export type SessionKeyHolder =
  | { kind: "conversation"; conversation: Conversation }
  | { kind: "read_only"; conversation: Conversation }
  | { kind: "sandbox"; sandbox: Sandbox & { userId: string } };

/** A read-only key: the prefix, the conversation's hex id, and a MAC of it under the deployment's secret. */
const READ_ONLY_PREFIX = "tern_ro_";
const READ_ONLY_KEY = /^tern_ro_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;
const READ_ONLY_SECRET = "read_only_key_secret";

/** The deployment's secret of read-only keys, generated once and kept in Postgres (every replica reads the same). */
const secrets = new WeakMap<object, Promise<string>>();
const readOnlySecret = (db: Kysely<Database>): Promise<string> => {
  let secret = secrets.get(db);
  if (!secret) {
    secret = deploymentSecretsRepository(db).getOrCreate(READ_ONLY_SECRET, () => randomBytes(32).toString("base64url"));
    secrets.set(db, secret);
    secret.catch(() => secrets.delete(db));
  }
  return secret;
};

const macOf = (secret: string, hexId: string) =>
  createHmac("sha256", secret).update(`conversation-read-only:${hexId}`).digest("base64url");

/**
 * The read-only key of a conversation: the same each time it is asked (it holds no state), valid
 * while the conversation's keys stand. The caller checked that the conversation is its own.
 */
export const readOnlyKeyOf = async (deps: Pick<ServiceDeps, "db">, conversationId: string): Promise<string> => {
  const hexId = toHexId(conversationId);
  return `${READ_ONLY_PREFIX}${hexId}_${macOf(await readOnlySecret(deps.db), hexId)}`;
};

/** The conversation a read-only key reads; null when the key is not one, or its conversation is gone. */
const readOnlyHolder = async (deps: Pick<ServiceDeps, "db">, key: string): Promise<Conversation | null> => {
  const m = READ_ONLY_KEY.exec(key);
  const id = m?.[1] ? parseId(m[1]) : null;
  if (!m?.[1] || !m[2] || !id) return null;
  const expected = Buffer.from(macOf(await readOnlySecret(deps.db), m[1]));
  const given = Buffer.from(m[2]);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  return conversationsRepository(deps.db).findWithLiveKeys(id);
};

/**
 * The holder of `key`, or null when no live record holds it. `conversationsOnly`: a sandbox's own
 * key is not looked for (the app routes take only conversations' keys), saving the second read.
 */
export const holderOfSessionKey = async (
  deps: Pick<ServiceDeps, "db">,
  key: string,
  opts: { conversationsOnly?: boolean } = {},
): Promise<SessionKeyHolder | null> => {
  if (key.startsWith(READ_ONLY_PREFIX)) {
    const conversation = await readOnlyHolder(deps, key);
    return conversation ? { kind: "read_only", conversation } : null;
  }
  const conversation = await conversationsRepository(deps.db).findBySessionKey(key);
  if (conversation) return { kind: "conversation", conversation };
  if (opts.conversationsOnly) return null;
  const sandbox = await sandboxesRepository(deps.db).findBySessionKey(key);
  // A sandbox row always has its user once its key exists; one without is no holder.
  return sandbox?.userId ? { kind: "sandbox", sandbox: { ...sandbox, userId: sandbox.userId } } : null;
};

/** The user and conversation a holder acts for (a sandbox of its own: its conversation, else itself). */
export const sessionOf = (
  holder: SessionKeyHolder,
): { userId: string; conversationId: string; sandboxId: string | null } =>
  holder.kind === "sandbox"
    ? {
        userId: holder.sandbox.userId,
        conversationId: holder.sandbox.conversationId ?? holder.sandbox.id,
        sandboxId: holder.sandbox.id,
      }
    : {
        userId: holder.conversation.userId,
        conversationId: holder.conversation.id,
        sandboxId: holder.conversation.sandboxId,
      };
