import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { engineSandboxDriver, ensureTestEngine } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enforceDockerContainment } from "../src/docker/containment.ts";
import { resolveEgress } from "../src/docker/egress-names.ts";
import { createDockerClient } from "../src/docker/engine.ts";
import { createDockerProbe, type DockerProbe, removeEgressPolicy } from "../src/docker/index.ts";

// The egress rules as installed on the containment engine's host, while a name of the policy does
// not resolve and after it does: the rest is installed at once, the name's rule follows at the
// next resolution. Addresses are documentation ranges: nothing is ever sent to them.

let host = "";
let probe: DockerProbe;
let bridge = "";
const network = `terntest-names-${randomBytes(4).toString("hex")}`;

const rules = () => execFileSync("iptables", ["-S", `TERN-EGRESS-${bridge}`], { encoding: "utf8" });

beforeAll(async () => {
  host = await ensureTestEngine(2);
  probe = createDockerProbe({ host });
  await engineSandboxDriver(host, network).prepare();
  ({ bridge } = await probe.bridgeOf(network));
}, 15 * 60_000);

afterAll(async () => {
  if (bridge) await removeEgressPolicy(bridge);
  await probe?.removeNetwork(network);
});

describe("egress names on a real engine", () => {
  it("installs the rest while a name does not resolve, and its rule once it does", async () => {
    let late: string[] | null = null;
    const resolve = async (name: string) => {
      if (name === "late.example.invalid" && late) return late;
      throw new Error(`getaddrinfo ENOTFOUND ${name}`);
    };
    const contained = await enforceDockerContainment(
      createDockerClient({ host }),
      network,
      { egress: { mode: "allowlist", services: [], allow: ["late.example.invalid", "192.0.2.10"] } },
      { resolve },
    );
    try {
      expect(contained.egress?.state().unresolved.map((u) => u.name)).toEqual(["late.example.invalid"]);
      expect(rules()).toContain("-d 192.0.2.10/32 -j RETURN");
      expect(rules()).not.toContain("198.51.100.99");

      late = ["198.51.100.99"];
      await contained.egress?.refresh();
      expect(contained.egress?.state().unresolved).toEqual([]);
      expect(rules()).toContain("-d 198.51.100.99/32 -j RETURN");
      expect(rules()).toContain("-d 192.0.2.10/32 -j RETURN");
    } finally {
      contained.egress?.stop();
    }
  }, 120_000);

  it("finds that a .invalid name does not resolve with the system's own resolver, without failing", async () => {
    const { policy, unresolved } = await resolveEgress({
      mode: "none",
      services: [{ host: "git.example.invalid", port: 443 }],
      allow: ["192.0.2.11"],
    });
    expect(unresolved).toEqual([{ name: "git.example.invalid", reason: expect.stringMatching(/ENOTFOUND|EAI_AGAIN/) }]);
    expect(policy).toEqual({ mode: "none", services: [], allow: ["192.0.2.11/32"] });
  }, 60_000);
});
