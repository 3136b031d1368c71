import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import {
  type OutboundAddressPolicy,
  parseOutboundUrl,
  pinnedLookup,
  type Resolver,
  resolveOutboundAddresses,
} from "@tern/core";

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
  (policy: OutboundAddressPolicy, resolve?: Resolver) =>
  async (input: string | URL, init?: RequestInit): Promise<Response> => {
    const url = parseOutboundUrl(input, policy, "MCP");
    const [pinned] = await resolveOutboundAddresses(url, policy, "MCP", resolve);
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
          lookup: pinnedLookup(pinned!),
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
