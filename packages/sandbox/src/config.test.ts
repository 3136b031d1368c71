import { ConfigError } from "@tern/core";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { containmentConfigError, sandboxConfigFields, sandboxContainmentOf } from "./config.ts";
import { ContainmentError } from "./driver.ts";

const settings = (env: Record<string, string>) => z.object(sandboxConfigFields).parse(env);

describe("sandbox containment settings", () => {
  it("asks for a disk limit and public egress by default, with no rule (and no name to resolve) for the git hosts", () => {
    expect(sandboxContainmentOf(settings({}), [{ host: "github.com", port: 443 }])).toEqual({
      diskMb: 10240,
      sudo: "auto",
      egress: { mode: "public", services: [], allow: [], refreshMs: 60_000 },
    });
  });

  it("keeps the git hosts reachable in the closed modes", () => {
    for (const mode of ["none", "allowlist"]) {
      expect(
        sandboxContainmentOf(settings({ SANDBOX_EGRESS: mode }), [{ host: "github.com", port: 443 }]).egress,
      ).toMatchObject({ mode, services: [{ host: "github.com", port: 443 }] });
    }
  });

  it("leaves out what the operator opted out of by name, and adds the runtime asked for", () => {
    const env = { SANDBOX_DISK_ENFORCE: "false", SANDBOX_EGRESS_ENFORCE: "false", SANDBOX_RUNTIME: "runsc" };
    expect(sandboxContainmentOf(settings(env))).toEqual({ runtime: "runsc", sudo: "auto" });
    expect(sandboxContainmentOf(settings({ SANDBOX_SUDO: "force" })).sudo).toBe("force");
    expect(() => settings({ SANDBOX_SUDO: "yes" })).toThrow();
    expect(settings({ SANDBOX_EGRESS_ALLOW: " 10.1.0.0/16, mirror.example " }).SANDBOX_EGRESS_ALLOW).toEqual([
      "10.1.0.0/16",
      "mirror.example",
    ]);
    expect(() => settings({ SANDBOX_EGRESS: "open" })).toThrow();
    expect(() => settings({ SANDBOX_DISK_ENFORCE: "nope" })).toThrow();
  });

  it("turns a containment the backend cannot give into the error that names the variable and the opt-out", () => {
    const err = containmentConfigError(new ContainmentError("disk", "cannot limit"));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.variable).toBe("SANDBOX_DISK_MB");
    expect(err.message).toMatch(/cannot limit; or set SANDBOX_DISK_ENFORCE=false/);
    expect(containmentConfigError(new ContainmentError("egress", "x")).message).toMatch(/SANDBOX_EGRESS_ENFORCE=false/);
  });
});
