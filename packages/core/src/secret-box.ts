import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Encryption at rest for what users hand us (secrets, provider tokens, LLM keys, webhook secrets):
 * AES-256-GCM under a key from SECRETS_KEY. Every sealed value names the id of its key, so keys can
 * be rotated: the first key of SECRETS_KEY seals, every listed key opens.
 *
 * Sealed form: `v1.<keyId>.<iv>.<ciphertext>.<tag>`, base64url parts. The optional `context`
 * (e.g. "secret:<userId>:<name>") is bound as additional data: a value copied to another row or
 * user does not open there.
 */
export interface SecretBox {
  /** The id of the key that seals. */
  readonly keyId: string;
  seal: (plaintext: string, context?: string) => string;
  /** Throws SecretBoxError when the value is malformed, its key is unknown or it was tampered with. */
  open: (sealed: string, context?: string) => string;
  /** The key id a sealed value names (null when malformed): for rotation. */
  keyIdOf: (sealed: string) => string | null;
}

export class SecretBoxError extends Error {
  override name = "SecretBoxError";
}

const VERSION = "v1";
const KEY_BYTES = 32;
const IV_BYTES = 12;

/** A key's id: the first 8 hex digits of its SHA-256, so the same key always has the same id. */
export const secretKeyId = (key: Buffer): string => createHash("sha256").update(key).digest("hex").slice(0, 8);

const b64 = (b: Buffer) => b.toString("base64url");

/** `keys[0]` seals; all of them open. */
export const createSecretBox = (keys: readonly Buffer[]): SecretBox => {
  if (keys.length === 0) throw new SecretBoxError("no secrets key");
  const byId = new Map<string, Buffer>();
  for (const key of keys) {
    if (key.length !== KEY_BYTES) throw new SecretBoxError(`a secrets key must be ${KEY_BYTES} bytes`);
    byId.set(secretKeyId(key), key);
  }
  const keyId = secretKeyId(keys[0]!);
  const sealKey = keys[0]!;
  const parts = (sealed: string) => {
    const p = sealed.split(".");
    return p.length === 5 && p[0] === VERSION ? p : null;
  };
  return {
    keyId,
    seal(plaintext, context = "") {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", sealKey, iv);
      cipher.setAAD(Buffer.from(context));
      const ct = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
      return [VERSION, keyId, b64(iv), b64(ct), b64(cipher.getAuthTag())].join(".");
    },
    open(sealed, context = "") {
      const p = parts(sealed);
      if (!p) throw new SecretBoxError("not a sealed value");
      const key = byId.get(p[1]!);
      if (!key) throw new SecretBoxError(`sealed under key ${p[1]}, which SECRETS_KEY does not hold`);
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(p[2]!, "base64url"));
        decipher.setAAD(Buffer.from(context));
        decipher.setAuthTag(Buffer.from(p[4]!, "base64url"));
        return Buffer.concat([decipher.update(Buffer.from(p[3]!, "base64url")), decipher.final()]).toString("utf8");
      } catch {
        throw new SecretBoxError("a sealed value does not open: tampered with, or sealed for another place");
      }
    },
    keyIdOf: (sealed) => parts(sealed)?.[1] ?? null,
  };
};

/** One key: 64 hex digits or base64 of 32 bytes. */
const parseKey = (text: string): Buffer => {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, "hex") : Buffer.from(t, "base64");
  if (key.length !== KEY_BYTES) {
    throw new SecretBoxError("SECRETS_KEY: each key must be 32 bytes, as 64 hex digits or base64");
  }
  return key;
};

/** SECRETS_KEY: comma-separated keys, the first one sealing (put the new key first to rotate). */
export const parseSecretsKeys = (value: string): Buffer[] =>
  value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map(parseKey);

export const generateSecretsKey = (): string => randomBytes(KEY_BYTES).toString("base64");

/**
 * The deployment's keys: SECRETS_KEY when set; otherwise, unless `required`, the key kept in
 * `keyFile`, generated on the first start and written with mode 0600 (a local set-up needs nothing).
 */
export const loadSecretsKeys = (opts: { value?: string; keyFile: string; required?: boolean }): Buffer[] => {
  if (opts.value?.trim()) return parseSecretsKeys(opts.value);
  if (opts.required) throw new SecretBoxError("SECRETS_KEY is required here (no key file is generated)");
  if (!existsSync(opts.keyFile)) {
    mkdirSync(dirname(opts.keyFile), { recursive: true, mode: 0o700 });
    // Written whole under another name, then linked into place: of two processes starting at once,
    // one key wins and neither reads a half-written file.
    const tmp = `${opts.keyFile}.${process.pid}.${randomBytes(4).toString("hex")}`;
    writeFileSync(tmp, `${generateSecretsKey()}\n`, { mode: 0o600 });
    try {
      linkSync(tmp, opts.keyFile);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    } finally {
      unlinkSync(tmp);
    }
  }
  chmodSync(opts.keyFile, 0o600);
  return parseSecretsKeys(readFileSync(opts.keyFile, "utf8"));
};

/** The deployment's secret box, from its settings: SECRETS_KEY, else the key file (made on a local first start). */
export const secretBoxFromConfig = (config: {
  SECRETS_KEY?: string | undefined;
  SECRETS_KEY_FILE: string;
}): SecretBox => createSecretBox(loadSecretsKeys({ value: config.SECRETS_KEY, keyFile: config.SECRETS_KEY_FILE }));

/**
 * Replaces every occurrence of each secret's value in `text` with `<secret:NAME>`: for whatever is
 * stored or logged from a run that had the secrets in its environment. Longer values first, so a
 * value that contains another is masked whole. Values shorter than 4 characters are not masked
 * (they would mask ordinary text everywhere); the secrets API refuses none, but says so.
 */
export const maskSecrets = (text: string, secrets: Readonly<Record<string, string>>): string => {
  const entries = Object.entries(secrets)
    .filter(([, v]) => v.length >= 4)
    .sort((a, b) => b[1].length - a[1].length);
  let out = text;
  for (const [name, value] of entries) out = out.split(value).join(`<secret:${name}>`);
  return out;
};
