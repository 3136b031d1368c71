import { lookup } from "node:dns/promises";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { Readable } from "node:stream";
import { isNonPublicAddress } from "@tern/core";

/**
 * Where a remote MCP server may be: the webhook rules (services/webhook-address.ts) with their own
 * switches, MCP_ALLOW_PRIVATE and MCP_ALLOW_HTTP.
 */
export interface McpAddressPolicy {
  allowPrivate: boolean;
  allowHttp: boolean;
}

export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

/** A refused URL or address: the server is left out, and the reason is said in the run's events. */
export class McpAddressError extends Error {
  override name = "McpAddressError";
}

const systemResolve: Resolver = (host) => lookup(host, { all: true, verbatim: true });

/** The URL's form checked (scheme by the policy, no credentials); McpAddressError otherwise. */
export const checkMcpUrl = (raw: string | URL, policy: McpAddressPolicy): URL => {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new McpAddressError("not a URL");
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && policy.allowHttp)) {
    throw new McpAddressError("must be an https URL (plain http is allowed only with MCP_ALLOW_HTTP=true)");
  }
  if (url.username || url.password) throw new McpAddressError("must not carry credentials");
  return url;
};

/** The address to connect to: `url`'s host resolved now, every address allowed by the policy. */
const checkedAddress = async (
  url: URL,
  policy: McpAddressPolicy,
  resolve: Resolver = systemResolve,
): Promise<{ address: string; family: number }> => {
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  let addresses: { address: string; family: number }[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    addresses = await resolve(host).catch(() => []);
    if (addresses.length === 0) throw new McpAddressError(`host ${host} does not resolve`);
  }
  if (!policy.allowPrivate) {
    // One refused address is enough: the connection could go to it.
    const refused = addresses.find((a) => isNonPublicAddress(a.address));
    if (refused) {
      throw new McpAddressError(
        `${host} resolves to ${refused.address}, a private, loopback or link-local address (refused unless MCP_ALLOW_PRIVATE=true)`,
      );
    }
  }
  return addresses[0] as { address: string; family: number };
};

const headersOf = (init: RequestInit | undefined): Record<string, string> => {
  const out: Record<string, string> = {};
  new Headers(init?.headers).forEach((v, k) => {
    out[k] = v;
  });
  return out;
};

/**
 * A fetch for the MCP SDK's transports that connects only to an address checked at that moment:
 * each request resolves the host again, checks every address against the policy, and pins the
 * connection to a checked one (a second lookup inside the HTTP client could answer differently:
 * DNS rebinding). Redirects are not followed (the SDK sees them as failures).
 */
export const pinnedFetch =
  (policy: McpAddressPolicy, resolve: Resolver = systemResolve) =>
  async (input: string | URL, init?: RequestInit): Promise<Response> => {
    const url = checkMcpUrl(input, policy);
    const pinned = await checkedAddress(url, policy, resolve);
    const pinLookup: LookupFunction = (_host, opts, cb) => {
      if ((opts as { all?: boolean }).all) {
        (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [pinned]);
      } else {
        cb(null, pinned.address, pinned.family);
      }
    };
    const body =
      init?.body === undefined || init.body === null
        ? undefined
        : typeof init.body === "string"
          ? init.body
          : Buffer.from(await new Response(init.body).arrayBuffer());
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    return await new Promise<Response>((resolvePromise, reject) => {
      const req = send(
        url,
        {
          method: init?.method ?? "GET",
          headers: headersOf(init),
          lookup: pinLookup,
          signal: init?.signal ?? undefined,
        },
        (res: IncomingMessage) => {
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (Array.isArray(v)) for (const one of v) headers.append(k, one);
            else if (v !== undefined) headers.set(k, v);
          }
          const status = res.statusCode ?? 502;
          const noBody = status === 204 || status === 304 || init?.method === "HEAD";
          if (noBody) res.resume();
          resolvePromise(
            new Response(noBody ? null : (Readable.toWeb(res) as unknown as ReadableStream<Uint8Array>), {
              status,
              statusText: res.statusMessage ?? "",
              headers,
            }),
          );
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  };
