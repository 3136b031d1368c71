import { describe, expect, it } from "vitest";
import { pgTimestampToIso } from "./connection.ts";

describe("pgTimestampToIso", () => {
  it("writes six fraction digits whatever Postgres printed, so the strings sort as the times do", () => {
    expect(pgTimestampToIso("2026-11-22 21:11:34.123456+00")).toBe("2026-11-22T21:11:34.123456Z");
    expect(pgTimestampToIso("2026-11-22 21:11:34.12345+00")).toBe("2026-11-22T21:11:34.123450Z");
    expect(pgTimestampToIso("2026-11-22 21:11:34+00")).toBe("2026-11-22T21:11:34.000000Z");
    expect(pgTimestampToIso("2026-11-22 21:11:34.5+00") < pgTimestampToIso("2026-11-22 21:11:34.500001+00")).toBe(true);
  });
});
