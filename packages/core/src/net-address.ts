import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";

/**
 * Which addresses are not the public internet: the one rule for everything a user may point the
 * service at (webhook URLs, self-hosted git hosts, LLM base URLs), so the service cannot be aimed
 * at its own networks (SSRF).
 */

// Everything that is not the public internet: loopback, private, carrier-grade NAT, link-local
// (cloud metadata at 169.254.169.254), "this network", benchmarking, documentation, multicast,
// reserved; and their IPv6 counterparts (v4-mapped addresses are checked as the IPv4 inside).
const nonPublic = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  nonPublic.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  // Unspecified, loopback and the deprecated IPv4-compatible addresses.
  ["::", 96],
  ["64:ff9b::", 96],
  ["100::", 64],
  ["2001:db8::", 32],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const) {
  nonPublic.addSubnet(net, prefix, "ipv6");
}

/** The IPv4 address inside an IPv4-mapped IPv6 address (::ffff:a.b.c.d or ::ffff:7f00:1), if any. */
const mappedIpv4 = (address: string): string | null => {
  const dotted = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (dotted?.[1]) return dotted[1];
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (!hex?.[1] || !hex[2]) return null;
  const hi = Number.parseInt(hex[1], 16);
  const lo = Number.parseInt(hex[2], 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
};

/** True for any address that is not on the public internet. */
export const isNonPublicAddress = (address: string): boolean => {
  const family = isIP(address);
  if (family === 4) return nonPublic.check(address, "ipv4");
  if (family !== 6) return true;
  const v4 = mappedIpv4(address);
  if (v4) return nonPublic.check(v4, "ipv4");
  return nonPublic.check(address, "ipv6");
};

/**
 * The first address `host` (a name or an address literal, IPv6 with or without brackets) resolves to
 * that is not public; null when every address is public. A name that does not resolve gives null:
 * what cannot be reached cannot be reached inside either.
 */
export const nonPublicAddressOf = async (host: string): Promise<string | null> => {
  const bare = host.replace(/^\[(.*)\]$/, "$1");
  if (isIP(bare)) return isNonPublicAddress(bare) ? bare : null;
  const addresses = await lookup(bare, { all: true, verbatim: true }).catch(() => []);
  return addresses.find((a) => isNonPublicAddress(a.address))?.address ?? null;
};
