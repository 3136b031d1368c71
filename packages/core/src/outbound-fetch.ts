import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import {
  type OutboundAddressPolicy,
  type OutboundSettings,
  parseOutboundUrl,
  pinnedLookup,
  type Resolver,
  resolveOutboundAddresses,
} from "./outbound-address.ts";

/** A remote answer grew past the cap its caller set: the connection is cut, nothing more is read. */
export class OutboundResponseTooLargeError extends Error {
  override name = "OutboundResponseTooLargeError";
}

export interface CheckedFetchOptions {
  policy: OutboundAddressPolicy;
  /** Whose settings a refusal names (WEBHOOK_ALLOW_PRIVATE, MCP_ALLOW_HTTP, LLM_USER_BASE_URLS, …). */
  settings: OutboundSettings;
  /** Name resolution, for tests (a hosts mapping, never real DNS there); the system resolver by default. */
  resolve?: Resolver | undefined;
  /** Bytes of one answer's body past which it fails with OutboundResponseTooLargeError; absent: no cap. */
  maxResponseBytes?: number | undefined;
}

/** What the SDKs (OpenAI, Anthropic, MCP) take as their `fetch`. */
export type CheckedFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

const headersOf = (init: RequestInit | undefined, request: Request | null): Record<string, string> => {
  const out: Record<string, string> = {};
  new Headers(init?.headers ?? request?.headers).forEach((v, k) => {
    out[k] = v;
  });
  return out;
};

const bodyOf = async (init: RequestInit | undefined, request: Request | null): Promise<string | Buffer | undefined> => {
  const body = init?.body ?? request?.body;
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return body;
  return Buffer.from(await new Response(body).arrayBuffer());
};

/**
 * The one HTTP client for every URL a user names (webhooks, remote MCP servers, a user's LLM
 * endpoint): each request parses the URL (scheme, no credentials), resolves its host, checks every
 * address against the policy after resolution (a trailing dot, upper case or a public name that
 * resolves inside are refused alike), and pins the connection to a checked address (a second lookup
 * inside the HTTP client could answer differently: DNS rebinding). Redirects are never followed:
 * a 3xx reaches the caller as it is. A refusal throws OutboundAddressError before any connection.
 */
export const checkedFetch =
  (opts: CheckedFetchOptions): CheckedFetch =>
  async (input, init) => {
    const request = input instanceof Request ? input : null;
    const url = parseOutboundUrl(input instanceof Request ? input.url : input, opts.policy, opts.settings);
    const [pinned] = await resolveOutboundAddresses(url, opts.policy, opts.settings, opts.resolve);
    const method = init?.method ?? request?.method ?? "GET";
    const body = await bodyOf(init, request);
    const signal = init?.signal ?? request?.signal ?? undefined;
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    return await new Promise<Response>((resolvePromise, reject) => {
      const req = send(
        url,
        { method, headers: headersOf(init, request), lookup: pinnedLookup(pinned!), ...(signal ? { signal } : {}) },
        (res: IncomingMessage) => {
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (Array.isArray(v)) for (const one of v) headers.append(k, one);
            else if (v !== undefined) headers.set(k, v);
          }
          const status = res.statusCode ?? 502;
          const noBody = status === 204 || status === 304 || method === "HEAD";
          if (noBody) res.resume();
          else if (opts.maxResponseBytes !== undefined) capBody(res, opts.maxResponseBytes, url);
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

/** Cuts `res` with OutboundResponseTooLargeError once more than `max` bytes came. */
const capBody = (res: IncomingMessage, max: number, url: URL) => {
  let seen = 0;
  res.on("data", (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > max) {
      res.destroy(new OutboundResponseTooLargeError(`the answer of ${url.host} is larger than ${max} bytes`));
    }
  });
};
