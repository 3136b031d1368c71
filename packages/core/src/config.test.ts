import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ConfigError, configFields, parseConfig } from "./config.ts";

const schema = z.object({
  DATABASE_URL: configFields.DATABASE_URL,
  PORT: configFields.PORT,
});

describe("parseConfig", () => {
  it("fills local defaults", () => {
    const cfg = parseConfig(schema, {});
    expect(cfg.DATABASE_URL).toMatch(/^postgres:\/\/.*127\.0\.0\.1:5432/);
    expect(cfg.PORT).toBe(3000);
  });

  it("names the variable that is wrong", () => {
    expect(() => parseConfig(schema, { DATABASE_URL: "nonsense" })).toThrowError(/DATABASE_URL/);
    try {
      parseConfig(schema, { PORT: "eighty" });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).variable).toBe("PORT");
    }
    expect.assertions(3);
  });
});
