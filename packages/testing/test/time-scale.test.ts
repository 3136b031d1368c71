import { afterEach, describe, expect, it } from "vitest";
import { scaled, timeScale } from "../src/time-scale.ts";

describe("timeScale", () => {
  const measured = process.env.TERN_TEST_TIME_SCALE;
  afterEach(() => {
    if (measured === undefined) delete process.env.TERN_TEST_TIME_SCALE;
    else process.env.TERN_TEST_TIME_SCALE = measured;
  });

  it("stretches deadlines by the measured factor, never below 1 and at most 6", () => {
    for (const [setting, factor] of [
      [undefined, 1],
      ["", 1],
      ["nonsense", 1],
      ["0.4", 1],
      ["2.5", 2.5],
      ["40", 6],
    ] as const) {
      if (setting === undefined) delete process.env.TERN_TEST_TIME_SCALE;
      else process.env.TERN_TEST_TIME_SCALE = setting;
      expect(timeScale(), String(setting)).toBe(factor);
      expect(scaled(1_000), String(setting)).toBe(1_000 * factor);
    }
  });
});
