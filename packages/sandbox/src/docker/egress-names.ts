import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { ContainmentError, type SandboxEgress } from "../driver.ts";
import { canonicalCidr, type EgressPolicy, type EgressService } from "./egress.ts";

/** A host name's addresses. */
export type Resolver = (host: string) => Promise<string[]>;

const resolveHost: Resolver = async (host) => (await lookup(host, { all: true })).map((a) => a.address);

/** Each name's addresses when it last resolved: a name that fails later keeps them. */
export type KnownAddresses = Map<string, string[]>;

export type ResolvedEgressPolicy = Pick<EgressPolicy, "mode" | "services" | "allow">;

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * The egress policy with every name resolved now, as the rules need addresses. A name that does
 * not resolve is in `unresolved` and contributes the addresses it last had (`known`), else none:
 * the rest of the policy holds. An entry that is neither a name nor an address is the operator's
 * mistake, and throws.
 */
export const resolveEgress = async (
  egress: Pick<SandboxEgress, "mode" | "services" | "allow">,
  resolve: Resolver = resolveHost,
  known: KnownAddresses = new Map(),
): Promise<{ policy: ResolvedEgressPolicy; unresolved: { name: string; reason: string }[] }> => {
  const unresolved = new Map<string, string>();
  const addressesOf = async (host: string): Promise<string[]> => {
    const bare = host.replace(/^\[(.*)\]$/, "$1");
    if (isIP(bare)) return [bare];
    try {
      const addresses = await resolve(bare);
      if (addresses.length === 0) throw new Error("no addresses");
      known.set(bare, addresses);
      return addresses;
    } catch (err) {
      unresolved.set(bare, messageOf(err));
      return known.get(bare) ?? [];
    }
  };
  const services = new Map<string, EgressService>();
  for (const { host, port } of egress.services) {
    for (const address of await addressesOf(host)) services.set(`${address}:${port}`, { address, port });
  }
  const allow: string[] = [];
  for (const entry of egress.allow) {
    try {
      if (entry.includes("/") || isIP(entry)) allow.push(canonicalCidr(entry).cidr);
      else allow.push(...(await addressesOf(entry)).map((a) => canonicalCidr(a).cidr));
    } catch (err) {
      throw new ContainmentError("egress", `cannot use '${entry}' as an address or CIDR: ${messageOf(err)}`);
    }
  }
  return {
    policy: { mode: egress.mode, services: [...services.values()], allow },
    unresolved: [...unresolved].map(([name, reason]) => ({ name, reason })),
  };
};
