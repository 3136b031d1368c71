import type { Logger } from "@tern/core";
import type Docker from "dockerode";
import { describe, expect, it, vi } from "vitest";
import { ContainmentError } from "../driver.ts";
import { enforceDockerContainment, rootStateOf } from "./containment.ts";
import { hardenedHostConfig } from "./driver.ts";
import type { applyEgressPolicy } from "./egress.ts";
import { resolveEgress } from "./egress-names.ts";

/** An engine on overlay2 over ext4 (no disk limit of its own) with runc only, and one network. */
const extEngine = {
  info: async () => ({ Driver: "overlay2", DriverStatus: [["Backing Filesystem", "extfs"]], Runtimes: { runc: {} } }),
  listImages: async () => [{ Id: "sha256:0123" }],
  getNetwork: () => ({ inspect: async () => ({ Driver: "bridge", Id: "0123456789abcdef", Options: {} }) }),
} as unknown as Docker;

const resolve = async (host: string) => {
  if (host.endsWith(".invalid")) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
  return host === "git.internal" ? ["10.1.2.3", "10.1.2.4"] : ["203.0.113.9"];
};

const refusal = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ContainmentError);
  return err as ContainmentError;
};

const installed = () =>
  vi.fn(async () => ({ replaced: false })) as unknown as typeof applyEgressPolicy & ReturnType<typeof vi.fn>;

describe("Docker containment at prepare", () => {
  it("watches the disk limit itself on an engine that cannot hold one, saying what it runs on", async () => {
    const c = await enforceDockerContainment(extEngine, "net", { diskMb: 1024 });
    expect(c.disk).toEqual({ mode: "watched", limitMb: 1024, storage: "overlay2 on extfs" });
    expect(c.summary.disk).toBe("1024 MB watched (overlay2 on extfs)");
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
    const applyEgress = installed();
    const egress = {
      mode: "allowlist" as const,
      services: [{ host: "git.internal", port: 443 }],
      allow: ["192.168.5.0/24", "mirror.example"],
    };
    const c = await enforceDockerContainment(extEngine, "net", { egress }, { applyEgress, resolve });
    c.egress?.stop();
    expect(c.summary).toEqual({ egress: "allowlist on br-0123456789ab" });
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

  it("installs the rest of the policy when a name does not resolve, and names it", async () => {
    const applyEgress = installed();
    const egress = {
      mode: "none" as const,
      services: [{ host: "git.example.invalid", port: 443 }],
      allow: ["mirror.example"],
    };
    const c = await enforceDockerContainment(extEngine, "net", { egress }, { applyEgress, resolve });
    c.egress?.stop();
    expect(c.summary.egress_unresolved).toBe("git.example.invalid");
    expect(c.egress?.state().unresolved).toEqual([
      expect.objectContaining({ name: "git.example.invalid", reason: expect.stringMatching(/ENOTFOUND/) }),
    ]);
    expect(applyEgress).toHaveBeenCalledWith(
      expect.objectContaining({
        policy: expect.objectContaining({ mode: "none", services: [], allow: ["203.0.113.9/32"] }),
      }),
    );
  });

  it("asks nothing of the engine for what is not asked for", async () => {
    const c = await enforceDockerContainment(extEngine, "net", {});
    expect(c).toEqual({
      summary: {},
      disk: { mode: "off", limitMb: null, storage: null },
      egress: null,
      root: { mapping: null, gvisor: [], sudo: "off" },
    });
  });

  it("names an allow entry it cannot use, and never asks a resolver about an address", async () => {
    const asked: string[] = [];
    const spy = async (host: string) => {
      asked.push(host);
      return ["203.0.113.9"];
    };
    const { policy } = await resolveEgress(
      { mode: "public", services: [{ host: "[fd00::5]", port: 8080 }], allow: ["10.0.0.1"] },
      spy,
    );
    expect(policy.services).toEqual([{ address: "fd00::5", port: 8080 }]);
    expect(asked).toEqual([]);
    const err = await refusal(resolveEgress({ mode: "public", services: [], allow: ["10.0.0.0/99"] }, spy));
    expect(err.message).toMatch(/10\.0\.0\.0\/99/);
  });
});

describe("root in sandboxes", () => {
  const engine = (info: Record<string, unknown>) =>
    ({ ...extEngine, info: async () => ({ ...(await extEngine.info()), ...info }) }) as unknown as Docker;
  const userns = engine({ SecurityOptions: ["name=seccomp,profile=builtin", "name=userns"] });
  const rootless = engine({ SecurityOptions: ["name=seccomp,profile=builtin", "name=rootless", "name=cgroupns"] });
  const gvisor = engine({ Runtimes: { runc: {}, gvisor: { path: "/usr/bin/runsc" } } });

  it("gives sudo only where the engine maps root to an unprivileged user, or under gVisor", async () => {
    const stateOn = async (docker: Docker, runtime?: string) => {
      const c = await enforceDockerContainment(docker, "net", { sudo: "auto", ...(runtime ? { runtime } : {}) });
      return { state: rootStateOf(c.root, runtime), summary: c.summary.root };
    };
    expect(await stateOn(extEngine)).toEqual({
      state: { mode: "none", safety: null, forced: false },
      summary: "no sudo",
    });
    expect((await stateOn(userns)).state).toEqual({ mode: "sudo", safety: "userns-remap", forced: false });
    expect((await stateOn(rootless)).state).toEqual({ mode: "sudo", safety: "rootless", forced: false });
    // gVisor under whatever name it is registered: the sandboxes of that runtime only.
    expect(await stateOn(gvisor, "gvisor")).toEqual({
      state: { mode: "sudo", safety: "runsc", forced: false },
      summary: "sudo (runsc)",
    });
    const onGvisor = await enforceDockerContainment(gvisor, "net", { sudo: "auto" });
    expect(rootStateOf(onGvisor.root, undefined).mode).toBe("none");
    expect(rootStateOf(onGvisor.root, "gvisor").mode).toBe("sudo");
  });

  it("gives none when the setting is off or absent, and sudo anywhere when forced, saying so loudly", async () => {
    const off = await enforceDockerContainment(userns, "net", { sudo: "off" });
    expect(rootStateOf(off.root, undefined)).toEqual({ mode: "none", safety: "userns-remap", forced: false });
    const absent = await enforceDockerContainment(userns, "net", {});
    expect(rootStateOf(absent.root, undefined).mode).toBe("none");
    const logger = { warn: vi.fn(), info: vi.fn(), error: vi.fn(), debug: vi.fn() };
    const forced = await enforceDockerContainment(
      extEngine,
      "net",
      { sudo: "force" },
      {
        logger: logger as unknown as Logger,
      },
    );
    expect(rootStateOf(forced.root, undefined)).toEqual({ mode: "sudo", safety: null, forced: true });
    expect(forced.summary.root).toMatch(/FORCED/);
    expect(logger.warn).toHaveBeenCalledWith(expect.anything(), expect.stringMatching(/SANDBOX_SUDO=force/));
  });

  it("lifts no-new-privileges and adds exactly the package-install capabilities for sudo only", () => {
    const limits = { memoryMb: 512, cpus: 1, pids: 256 };
    const none = hardenedHostConfig(limits, "net");
    expect(none.CapDrop).toEqual(["ALL"]);
    expect(none.CapAdd).toBeUndefined();
    expect(none.SecurityOpt).toEqual(["no-new-privileges:true"]);
    const sudo = hardenedHostConfig(limits, "net", undefined, undefined, "sudo");
    expect(sudo.CapDrop).toEqual(["ALL"]);
    expect(sudo.CapAdd).toEqual(["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID"]);
    // Lifting no-new-privileges is all: no seccomp=unconfined, no apparmor change, never privileged.
    expect(sudo.SecurityOpt).toEqual([]);
    expect(sudo.Privileged).toBe(false);
  });
});
