import { describe, expect, it } from "vitest";
import { parseIsoTimestamp } from "./iso-timestamp.ts";

describe("parseIsoTimestamp", () => {
  it("reads a time without a zone as UTC and keeps microseconds", () => {
    expect(parseIsoTimestamp("2026-11-22T21:11:34.123456")?.text).toBe("2026-11-22T21:11:34.123456+00:00");
    expect(parseIsoTimestamp("2026-11-22T21:11:34.5Z")?.text).toBe("2026-11-22T21:11:34.500000+00:00");
    expect(parseIsoTimestamp("2026-11-22")?.text).toBe("2026-11-22T00:00:00.000000+00:00");
  });

  it("keeps an explicit zone and computes the instant from it", () => {
    const t = parseIsoTimestamp("2026-11-22T23:11:34+02:00");
    expect(t?.text).toBe("2026-11-22T23:11:34.000000+02:00");
    expect(t?.epochMs).toBe(Date.parse("2026-11-22T21:11:34Z"));
    expect(parseIsoTimestamp("2026-11-22T21:11:34.000999-0130")?.epochMs).toBe(Date.parse("2026-11-22T22:41:34Z"));
  });

  it("reads an offset whose + became a space in an unencoded query string", () => {
    expect(parseIsoTimestamp("2026-11-22T23:11:34.5 02:00")?.text).toBe("2026-11-22T23:11:34.500000+02:00");
  });

  it("refuses what is not a real time", () => {
    for (const bad of [
      "",
      "yesterday",
      "2026-02-30T00:00:00Z",
      "2026-13-01",
      "2026-11-22T24:00:00Z",
      "2026-11-22T21:11:34.1234567Z",
      "1700000000",
      "2026-11-22T21:11:34+25:00",
    ]) {
      expect(parseIsoTimestamp(bad), bad).toBeNull();
    }
  });
});
