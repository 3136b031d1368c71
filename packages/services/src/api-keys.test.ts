import { ValidationError } from "@tern/core";
import { describe, expect, it } from "vitest";
import { keyExpiry } from "./api-keys.ts";

const DAY_MS = 86_400_000;
const now = Date.parse("2026-11-22T12:00:00Z");

const refusal = (raw: string, maxDays: number): ValidationError => {
  try {
    keyExpiry(raw, maxDays, now);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error(`${raw} was accepted`);
};

describe("keyExpiry", () => {
  it("is the lifetime cap when no expiry is asked for: no key lives for ever", () => {
    expect(keyExpiry(null, 30, now)).toBe(new Date(now + 30 * DAY_MS).toISOString());
    expect(keyExpiry(undefined, 30, now)).toBe(new Date(now + 30 * DAY_MS).toISOString());
  });

  it("accepts a time up to the cap, normalised (no zone means UTC)", () => {
    expect(keyExpiry("2026-12-01T00:00:00", 30, now)).toBe("2026-12-01T00:00:00.000000+00:00");
    expect(keyExpiry(new Date(now + 30 * DAY_MS).toISOString(), 30, now)).toBe("2026-12-22T12:00:00.000000+00:00");
  });

  it("refuses a time past the cap, naming the field and the cap", () => {
    const err = refusal(new Date(now + 30 * DAY_MS + 1).toISOString(), 30);
    expect(err.message).toBe("expires_at: at most 30 days ahead");
    expect(err.details).toEqual([{ field: "expires_at", in: "json", message: "at most 30 days ahead" }]);
  });

  it("refuses a time in the past or now, and one that is not ISO 8601", () => {
    expect(refusal(new Date(now).toISOString(), 30).message).toBe("expires_at: must be in the future");
    expect(refusal("2026-11-21T00:00:00Z", 30).message).toBe("expires_at: must be in the future");
    expect(refusal("next tuesday", 30).message).toBe("expires_at: not an ISO 8601 timestamp");
    expect(refusal("2026-02-30T00:00:00Z", 30).message).toBe("expires_at: not an ISO 8601 timestamp");
  });
});
