import { createHash, randomBytes } from "node:crypto";
import { type SecretBox, SecretBoxError } from "./secret-box.ts";

/** Keys carry a recognisable prefix, so a leaked one can be found by secret scanners. */
export const API_KEY_PREFIX = "oh_";

export const hashApiKey = (key: string): string => createHash("sha256").update(key).digest("hex");

export interface GeneratedApiKey {
  key: string;
  /** What listings show of a key: enough to tell keys apart, too little to use. */
  prefix: string;
  hash: string;
}

export const generateApiKey = (): GeneratedApiKey => {
  const key = `${API_KEY_PREFIX}${randomBytes(24).toString("base64url")}`;
  return { key, prefix: key.slice(0, API_KEY_PREFIX.length + 6), hash: hashApiKey(key) };
};

/** Per-conversation session keys, for X-Session-API-Key. */
export const generateSessionApiKey = (): string => `sess_${randomBytes(24).toString("base64url")}`;

/**
 * A session key as it is stored: never in plaintext. Its SHA-256 finds the conversation
 * a presented key belongs to; the key sealed in the secret box (bound to its conversation) is what
 * lets its owner read it back in the conversation's record, as OpenHands returns it.
 */
export interface StoredSessionApiKey {
  hash: string;
  sealed: string;
}

const sessionKeyContext = (conversationId: string) => `session-key:${conversationId}`;

export const sealSessionApiKey = (box: SecretBox, conversationId: string, key: string): StoredSessionApiKey => ({
  hash: hashApiKey(key),
  sealed: box.seal(key, sessionKeyContext(conversationId)),
});

/** A new session key for a conversation, and its stored form. */
export const issueSessionApiKey = (
  box: SecretBox,
  conversationId: string,
): { key: string; stored: StoredSessionApiKey } => {
  const key = generateSessionApiKey();
  return { key, stored: sealSessionApiKey(box, conversationId, key) };
};

/**
 * The key a conversation's record shows: null once revoked, or when it was sealed under a key
 * SECRETS_KEY no longer holds (the key still authenticates by its hash; it just cannot be shown).
 */
export const openSessionApiKey = (box: SecretBox, conversationId: string, sealed: string | null): string | null => {
  if (sealed === null) return null;
  try {
    return box.open(sealed, sessionKeyContext(conversationId));
  } catch (err) {
    if (err instanceof SecretBoxError) return null;
    throw err;
  }
};
