import type { SecretBox } from "@tern/core";

/**
 * The conversation page's sign-in: a key pasted once becomes this cookie, the key sealed (AES-GCM,
 * the deployment's secret box) with its expiry, so the cookie is useless to anyone who cannot open
 * it and dies after PAGE_SESSION_TTL_SECONDS whatever the browser does. Each request still resolves
 * the key itself, so a revoked key signs the page out at once.
 */
export const PAGE_COOKIE = "tern_page";
const CONTEXT = "page-session";

export const sealPageSession = (box: SecretBox, key: string, ttlSeconds: number, now = Date.now()): string =>
  box.seal(JSON.stringify({ k: key, exp: now + ttlSeconds * 1000 }), CONTEXT);

/** The key a page cookie holds; null when it is forged, altered or expired. */
export const openPageSession = (box: SecretBox, value: string, now = Date.now()): string | null => {
  try {
    const { k, exp } = JSON.parse(box.open(value, CONTEXT)) as { k?: unknown; exp?: unknown };
    return typeof k === "string" && typeof exp === "number" && exp > now ? k : null;
  } catch {
    return null;
  }
};
