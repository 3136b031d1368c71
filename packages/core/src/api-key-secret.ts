import { createHash, randomBytes } from "node:crypto";

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
