import { lookup } from "node:dns/promises";
import { isIP, type LookupFunction } from "node:net";
import { isNonPublicAddress } from "./net-address.ts";

/**
 * Where the service may send a user's requests (webhook deliveries, remote MCP servers): checked
 * when the user names the URL (the API), and again at every connection, on the address then
 * connected to (a name that resolved to a public address at first may resolve to a private one
 * later: DNS rebinding).
 */
export interface OutboundAddressPolicy {
  /** Private, loopback, link-local and other non-public addresses too (…_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** Plain http too (…_ALLOW_HTTP). */
  allowHttp: boolean;
}

/**
 * Whose settings widen the policy: a refusal names them (WEBHOOK_ALLOW_HTTP, MCP_ALLOW_PRIVATE, …;
 * for a user's LLM endpoint, an LLM_USER_BASE_URLS entry).
 */
export type OutboundSettings = "WEBHOOK" | "MCP" | "LLM" | "GIT";

const widenedBy = (settings: OutboundSettings, what: "PRIVATE" | "HTTP"): string =>
  settings === "LLM"
    ? "an LLM_USER_BASE_URLS entry names it"
    : // A git host is the deployment's own (GIT_BASE_URL*), or a user's that GIT_ALLOW_PRIVATE_HOSTS widens.
      settings === "GIT"
      ? "the deployment's own git host, or GIT_ALLOW_PRIVATE_HOSTS=true"
      : `${settings}_ALLOW_${what}=true`;

/** Why a URL or an address is refused, for the caller's 422, the delivery's error or the run's event. */
export class OutboundAddressError extends Error {
  override name = "OutboundAddressError";
}

export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

const systemResolve: Resolver = (host) => lookup(host, { all: true, verbatim: true });

/** The URL parsed, when its form is acceptable (scheme, no credentials); OutboundAddressError otherwise. */
export const parseOutboundUrl = (raw: string | URL, policy: OutboundAddressPolicy, settings: OutboundSettings): URL => {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundAddressError("not a URL");
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && policy.allowHttp)) {
    throw new OutboundAddressError(
      policy.allowHttp
        ? "must be an http or https URL"
        : `must be an https URL (plain http only where ${widenedBy(settings, "HTTP")})`,
    );
  }
  if (url.username || url.password) throw new OutboundAddressError("must not carry credentials");
  return url;
};

/**
 * The addresses `url`'s host stands for, every one of them allowed by `policy`; OutboundAddressError
 * when a name does not resolve or any address is refused (one refused address is enough: the
 * connection could go to it).
 */
export const resolveOutboundAddresses = async (
  url: URL,
  policy: OutboundAddressPolicy,
  settings: OutboundSettings,
  resolve: Resolver = systemResolve,
): Promise<{ address: string; family: number }[]> => {
  // The host of a URL as an address or a name (brackets of an IPv6 literal removed).
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  let addresses: { address: string; family: number }[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    addresses = await resolve(host).catch(() => []);
    if (addresses.length === 0) throw new OutboundAddressError(`host ${host} does not resolve`);
  }
  if (!policy.allowPrivate) {
    const refused = addresses.find((a) => isNonPublicAddress(a.address));
    if (refused) {
      throw new OutboundAddressError(
        `resolves to ${refused.address}, a private, loopback or link-local address (refused unless ${widenedBy(settings, "PRIVATE")})`,
      );
    }
  }
  return addresses;
};

/**
 * A `lookup` for node's HTTP clients that answers with `pinned` only: the connection goes to the
 * address just checked, never to what a second lookup inside the client might answer.
 */
export const pinnedLookup =
  (pinned: { address: string; family: number }): LookupFunction =>
  (_host, opts, cb) => {
    if ((opts as { all?: boolean }).all) {
      (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [pinned]);
    } else {
      cb(null, pinned.address, pinned.family);
    }
  };
