import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { isNonPublicAddress } from "@tern/core";

/**
 * Where a webhook may be delivered. Checked when it is registered (the API), and again at every
 * delivery on the address the worker then connects to (a name that resolved to a public address
 * at registration may resolve to a private one later: DNS rebinding).
 */
export interface WebhookAddressPolicy {
  /** WEBHOOK_ALLOW_PRIVATE: private, loopback, link-local and other non-public addresses too. */
  allowPrivate: boolean;
  /** WEBHOOK_ALLOW_HTTP: plain http too. */
  allowHttp: boolean;
}

/** Why a URL or an address is refused, for the caller's 422 or the delivery's error. */
export class WebhookAddressError extends Error {
  override name = "WebhookAddressError";
}

/** The URL parsed, when its form is acceptable (scheme, no credentials); WebhookAddressError otherwise. */
export const parseWebhookUrl = (raw: string, policy: WebhookAddressPolicy): URL => {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookAddressError("not a URL");
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && policy.allowHttp)) {
    throw new WebhookAddressError(
      policy.allowHttp ? "must be an http or https URL" : "must be an https URL (plain http is not allowed here)",
    );
  }
  if (url.username || url.password) throw new WebhookAddressError("must not carry credentials");
  return url;
};

/** The host of a URL as an address or a name (brackets of an IPv6 literal removed). */
const hostOf = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, "$1");

/**
 * The addresses `url`'s host stands for, every one of them allowed by `policy`; WebhookAddressError
 * when a name does not resolve or any address is refused (one refused address is enough: the
 * connection could go to it).
 */
export const resolveWebhookAddresses = async (
  url: URL,
  policy: WebhookAddressPolicy,
  resolve: (host: string) => Promise<{ address: string; family: number }[]> = (host) =>
    lookup(host, { all: true, verbatim: true }),
): Promise<{ address: string; family: number }[]> => {
  const host = hostOf(url);
  let addresses: { address: string; family: number }[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    try {
      addresses = await resolve(host);
    } catch {
      throw new WebhookAddressError(`host ${host} does not resolve`);
    }
    if (addresses.length === 0) throw new WebhookAddressError(`host ${host} does not resolve`);
  }
  if (!policy.allowPrivate) {
    const refused = addresses.find((a) => isNonPublicAddress(a.address));
    if (refused) {
      throw new WebhookAddressError(
        `resolves to ${refused.address}, a private, loopback or link-local address (refused unless WEBHOOK_ALLOW_PRIVATE=true)`,
      );
    }
  }
  return addresses;
};
