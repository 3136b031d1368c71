import { describe, expect, it } from "vitest";
import { startEgressKeeper } from "./egress-keeper.ts";
import type { ResolvedEgressPolicy } from "./egress-names.ts";

/** A DNS whose answers a test changes. */
const dns = (answers: Record<string, string[] | null>) => async (host: string) => {
  const a = answers[host];
  if (!a) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
  return a;
};

describe("the egress names kept in step with DNS", () => {
  it("writes the rules again when a name that did not resolve does, and when an address moves", async () => {
    const answers: Record<string, string[] | null> = { "git.example.invalid": null, "mirror.example": ["203.0.113.9"] };
    const writes: ResolvedEgressPolicy[] = [];
    const keeper = await startEgressKeeper({
      egress: { mode: "allowlist", services: [{ host: "git.example.invalid", port: 443 }], allow: ["mirror.example"] },
      install: async (p) => {
        writes.push(p);
      },
      resolve: dns(answers),
    });
    keeper.stop();
    expect(writes).toEqual([{ mode: "allowlist", services: [], allow: ["203.0.113.9/32"] }]);
    expect(keeper.state().unresolved.map((u) => u.name)).toEqual(["git.example.invalid"]);

    // Unchanged answers: nothing is rewritten.
    await keeper.refresh();
    expect(writes).toHaveLength(1);

    answers["git.example.invalid"] = ["198.51.100.7"];
    await keeper.refresh();
    expect(keeper.state().unresolved).toEqual([]);
    expect(writes.at(-1)?.services).toEqual([{ address: "198.51.100.7", port: 443 }]);

    answers["mirror.example"] = ["203.0.113.10"];
    await keeper.refresh();
    expect(writes.at(-1)?.allow).toEqual(["203.0.113.10/32"]);

    // A name that stops resolving keeps the addresses it had: a DNS hiccup opens and closes nothing.
    answers["git.example.invalid"] = null;
    await keeper.refresh();
    expect(keeper.state().unresolved.map((u) => u.name)).toEqual(["git.example.invalid"]);
    expect(writes.at(-1)?.services).toEqual([{ address: "198.51.100.7", port: 443 }]);
    expect(writes).toHaveLength(3);
  });

  it("retries a name that does not resolve on its own timer, soon", async () => {
    const answers: Record<string, string[] | null> = { "late.example.invalid": null };
    const writes: ResolvedEgressPolicy[] = [];
    const keeper = await startEgressKeeper({
      egress: { mode: "none", services: [], allow: ["late.example.invalid"], refreshMs: 60_000 },
      install: async (p) => {
        writes.push(p);
      },
      resolve: dns(answers),
    });
    try {
      answers["late.example.invalid"] = ["192.0.2.44"];
      const until = Date.now() + 10_000;
      while (keeper.state().unresolved.length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
      expect(keeper.state().unresolved).toEqual([]);
      expect(writes.at(-1)?.allow).toEqual(["192.0.2.44/32"]);
    } finally {
      keeper.stop();
    }
  });

  it("refuses at start only when the rules cannot be installed at all", async () => {
    await expect(
      startEgressKeeper({
        egress: { mode: "none", services: [], allow: [] },
        install: async () => {
          throw new Error("iptables: Permission denied");
        },
      }),
    ).rejects.toThrow(/Permission denied/);
  });
});
