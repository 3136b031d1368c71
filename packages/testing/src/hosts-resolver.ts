import type { Resolver } from "@tern/core";

/**
 * A resolver that answers from `hosts` alone (names compared as DNS does: case and a trailing dot
 * aside), and fails for any other name: a test of where a URL may lead never asks real DNS.
 */
export const hostsResolver =
  (hosts: Record<string, string | string[]>): Resolver =>
  async (host) => {
    const name = host.toLowerCase().replace(/\.$/, "");
    const entry = Object.entries(hosts).find(([h]) => h.toLowerCase() === name)?.[1];
    if (entry === undefined) throw Object.assign(new Error(`${host}: not in the test's hosts`), { code: "ENOTFOUND" });
    return (Array.isArray(entry) ? entry : [entry]).map((address) => ({
      address,
      family: address.includes(":") ? 6 : 4,
    }));
  };
