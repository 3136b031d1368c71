import { isIP } from "node:net";
import { isNonPublicAddress } from "./net-address.ts";
import {
  OutboundAddressError,
  type OutboundAddressPolicy,
  type Resolver,
  resolveOutboundAddresses,
} from "./outbound-address.ts";

/**
 * Who may use which LLM on whose key:
 * - On the operator's key (LLM_API_KEY) a conversation may use only the models of LLM_MODELS (only
 *   LLM_MODEL when it is unset; `*` for any), and only of the operator's provider: the key is never
 *   sent to another provider, whatever prefix `llm_model` carries.
 * - A user who set their own llm_api_key (or llm_base_url) in /api/v1/settings uses any model on it;
 *   their key goes only to their llm_base_url, or to the public API of the model's provider.
 * - A user's llm_base_url is called only through the checked client (outbound-fetch.ts): resolved,
 *   every address checked, the connection pinned, no redirects.
 */

const PROVIDER_PREFIX = /^(openai|anthropic)\//i;

/** `openai/gpt-4o` → { provider: "openai", model: "gpt-4o" }; no known prefix: provider null. */
export const splitModel = (name: string): { provider: "openai" | "anthropic" | null; model: string } => {
  const m = PROVIDER_PREFIX.exec(name);
  return m
    ? { provider: m[1]!.toLowerCase() as "openai" | "anthropic", model: name.slice(m[0].length) }
    : { provider: null, model: name };
};

export interface ServerLlmModels {
  LLM_PROVIDER?: string | undefined;
  LLM_MODEL?: string | undefined;
  /** LLM_MODELS, parsed: empty when unset. */
  LLM_MODELS?: readonly string[] | undefined;
}

/**
 * Whether `name` may run on the operator's key: of LLM_PROVIDER (a prefix naming another provider
 * is refused) and in LLM_MODELS (or equal to LLM_MODEL when that is unset). Returns the reason when not.
 */
export const serverModelRefusal = (settings: ServerLlmModels, name: string): string | null => {
  const { provider, model } = splitModel(name.trim());
  if (provider && settings.LLM_PROVIDER && provider !== settings.LLM_PROVIDER) {
    return `llm_model ${name} is a ${provider} model; this deployment's LLM is ${settings.LLM_PROVIDER} (set your own llm_api_key in /api/v1/settings to use another provider)`;
  }
  const listed = settings.LLM_MODELS?.length ? settings.LLM_MODELS : settings.LLM_MODEL ? [settings.LLM_MODEL] : [];
  if (listed.includes("*")) return null;
  if (listed.some((m) => splitModel(m).model === model)) return null;
  return `llm_model ${name} is not offered by this deployment (LLM_MODELS: ${listed.join(", ") || "none"})`;
};

const defaultPorts: Record<string, string> = { "https:": "443", "http:": "80" };

/** A URL's host as compared: lower case, a trailing dot dropped (`LOCALHOST.` is `localhost`). */
const hostOf = (u: URL) => u.hostname.toLowerCase().replace(/\.$/, "");
const portOf = (u: URL) => u.port || defaultPorts[u.protocol] || "";

/** `prefix` covers `path` whole segments at a time: `/v1` covers `/v1` and `/v1/chat`, not `/v10`. */
const pathCovers = (prefix: string, path: string) => {
  const p = prefix.replace(/\/+$/, "");
  return p === "" || path === p || path.startsWith(`${p}/`);
};

const parseUrl = (raw: string): URL | null => {
  try {
    return new URL(raw);
  } catch {
    return null;
  }
};

/**
 * The LLM_USER_BASE_URLS entry that covers `url`: same scheme, host and port (compared as parsed,
 * not as text, so `https://api.openai.com.evil.example` is not under `https://api.openai.com`),
 * then the entry's path as a prefix of whole segments. `*` covers nothing by itself: it only lifts
 * the list, and a URL under it must be public like any other.
 */
const coveringEntry = (url: URL, allowed: readonly string[]): string | null =>
  allowed.find((entry) => {
    const e = entry === "*" ? null : parseUrl(entry);
    return (
      e !== null &&
      e.protocol === url.protocol &&
      hostOf(e) === hostOf(url) &&
      portOf(e) === portOf(url) &&
      pathCovers(e.pathname, url.pathname)
    );
  }) ?? null;

/**
 * How a user's LLM endpoint may be reached, or why not. An operator's LLM_USER_BASE_URLS entry is
 * trusted as written (plain http and private addresses included: a self-hosted model); a URL no
 * entry covers must be https and public (no `localhost`, `*.internal` or non-public literal here,
 * and every address its name resolves to public: `policy` makes the checked client refuse the rest
 * at each request). With entries and no `*`, only what an entry covers.
 */
export type UserBaseUrlAccess =
  | { ok: true; policy: OutboundAddressPolicy; entry: string | null }
  | { ok: false; reason: string };

export const userBaseUrlAccess = (raw: string, allowed: readonly string[] = []): UserBaseUrlAccess => {
  const url = parseUrl(raw);
  if (!url) return { ok: false, reason: "llm_base_url is not a URL" };
  if (url.username || url.password) return { ok: false, reason: "llm_base_url must not carry credentials" };
  const entry = coveringEntry(url, allowed);
  if (entry) return { ok: true, policy: { allowPrivate: true, allowHttp: true }, entry };
  if (allowed.length > 0 && !allowed.includes("*")) {
    return {
      ok: false,
      reason: "llm_base_url is not among the LLM endpoints this deployment allows (LLM_USER_BASE_URLS)",
    };
  }
  if (url.protocol !== "https:") return { ok: false, reason: "llm_base_url must be https" };
  const host = hostOf(url).replace(/^\[|\]$/g, "");
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".internal")) {
    return { ok: false, reason: "llm_base_url must not name a host inside the deployment" };
  }
  if (isIP(host) && isNonPublicAddress(host)) {
    return { ok: false, reason: "llm_base_url must not name a loopback, private or link-local address" };
  }
  return { ok: true, policy: { allowPrivate: false, allowHttp: false }, entry: null };
};

/**
 * Whether a user may point their LLM at `url` (the worker calls it, so it must not reach inside the
 * deployment): `userBaseUrlAccess`, then, for a URL no entry covers, every address its name
 * resolves to now must be public (the worker's checked client looks again at each request).
 * Returns the reason when not.
 */
export const userBaseUrlRefusal = async (
  raw: string,
  allowed: readonly string[] = [],
  resolve?: Resolver,
): Promise<string | null> => {
  const access = userBaseUrlAccess(raw, allowed);
  if (!access.ok) return access.reason;
  if (access.entry) return null;
  try {
    await resolveOutboundAddresses(new URL(raw), access.policy, "LLM", resolve);
    return null;
  } catch (err) {
    if (err instanceof OutboundAddressError) return `llm_base_url ${err.message}`;
    throw err;
  }
};
