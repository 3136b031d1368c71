import { describe, expect, it } from "vitest";
import { parseId, toHexId } from "./ids.ts";

describe("ids", () => {
  it("accepts hyphenated and 32-hex forms alike", () => {
    const uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    expect(parseId(uuid)).toBe(uuid);
    expect(parseId(toHexId(uuid))).toBe(uuid);
    expect(parseId(uuid.toUpperCase())).toBe(uuid);
  });

  it("rejects anything else", () => {
    expect(parseId("nope")).toBeNull();
    expect(parseId("0f8fad5bd9cb469fa16570867728950")).toBeNull();
    expect(parseId("'; drop table users; --")).toBeNull();
  });
});
