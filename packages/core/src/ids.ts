import { randomUUID } from "node:crypto";

const HEX32 = /^[0-9a-f]{32}$/i;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const newId = (): string => randomUUID();

/** As OpenHands does, responses write ids as 32 hex characters without hyphens. */
export const toHexId = (uuid: string): string => uuid.replaceAll("-", "").toLowerCase();

/** Requests accept either form; returns the canonical hyphenated uuid, or null when `raw` is neither. */
export const parseId = (raw: string): string | null => {
  if (UUID.test(raw)) return raw.toLowerCase();
  if (HEX32.test(raw)) {
    const h = raw.toLowerCase();
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  return null;
};
