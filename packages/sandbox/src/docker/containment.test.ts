import type Docker from "dockerode";
import { describe, expect, it, vi } from "vitest";
import { ContainmentError } from "../driver.ts";
import { enforceDockerContainment, resolveEgress } from "./containment.ts";
import type { applyEgressPolicy } from "./egress.ts";

/** An engine on overlay2 over ext4 (no disk limit possible) with runc only, and one network. */
const extEngine = {
  info: async () => ({ Driver: "overlay2", DriverStatus: [["Backing Filesystem", "extfs"]], Runtimes: { runc: {} } }),
  listImages: async () => [{ Id: "sha256:0123" }],
  getNetwork: () => ({ inspect: async () => ({ Driver: "bridge", Id: "0123456789abcdef", Options: {} }) }),
} as unknown as Docker;

const resolve = async (host: string) => (host === "git.internal" ? ["10.1.2.3", "10.1.2.4"] : ["203.0.113.9"]);

const refusal = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ContainmentError);
  return err as ContainmentError;
};

describe("Docker containment at prepare", () => {
  it("refuses an engine that cannot limit disk, saying what it runs on", async () => {
    const err = await refusal(enforceDockerContainment(extEngine, "net", { diskMb: 1024 }));
    expect(err.part).toBe("disk");
    expect(err.message).toMatch(/overlay2 on extfs/);
  });

  it("refuses a runtime the engine does not have", async () => {
    expect((await refusal(enforceDockerContainment(extEngine, "net", { runtime: "runsc" }))).part).toBe("runtime");
  });

  it("refuses when the egress rules cannot be installed", async () => {
    const applyEgress = vi.fn(async () => {
      throw new Error("iptables: Permission denied");
    }) as unknown as typeof applyEgressPolicy;
    const egress = { mode: "public" as const, services: [{ host: "10.9.9.9", port: 3000 }], allow: [] };
    const err = await refusal(enforceDockerContainment(extEngine, "net", { egress }, { applyEgress, resolve }));
    expect(err.part).toBe("egress");
    expect(err.message).toMatch(/Permission denied/);
  });

  it("installs the policy on the network's bridge with every name resolved", async () => {
    const applyEgress = vi.fn(async () => ({ replaced: false })) as unknown as typeof applyEgressPolicy;
    const egress = {
      mode: "allowlist" as const,
      services: [{ host: "git.internal", port: 443 }],
      allow: ["192.168.5.0/24", "mirror.example"],
    };
    expect(await enforceDockerContainment(extEngine, "net", { egress }, { applyEgress, resolve })).toEqual({
      egress: "allowlist on br-0123456789ab",
    });
    expect(applyEgress).toHaveBeenCalledWith(
      expect.objectContaining({
        bridge: "br-0123456789ab",
        ipv6: false,
        policy: expect.objectContaining({
          mode: "allowlist",
          services: [
            { address: "10.1.2.3", port: 443 },
            { address: "10.1.2.4", port: 443 },
          ],
          allow: ["192.168.5.0/24", "203.0.113.9/32"],
        }),
      }),
    );
  });

  it("asks nothing of the engine for what is not asked for", async () => {
    expect(await enforceDockerContainment(extEngine, "net", {})).toEqual({});
  });

  it("names an allow entry it cannot use, and never asks a resolver about an address", async () => {
    const asked: string[] = [];
    const spy = async (host: string) => {
      asked.push(host);
      return ["203.0.113.9"];
    };
    const policy = await resolveEgress(
      { mode: "public", services: [{ host: "[fd00::5]", port: 8080 }], allow: ["10.0.0.1"] },
      spy,
    );
    expect(policy.services).toEqual([{ address: "fd00::5", port: 8080 }]);
    expect(asked).toEqual([]);
    const err = await refusal(resolveEgress({ mode: "public", services: [], allow: ["10.0.0.0/99"] }, spy));
    expect(err.message).toMatch(/10\.0\.0\.0\/99/);
  });
});
