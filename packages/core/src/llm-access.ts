import { isIP } from "node:net";
import { isNonPublicAddress } from "./net-address.ts";

/**
 * Who may use which LLM on whose key:
 * - On the operator's key (LLM_API_KEY) a conversation may use only the models of LLM_MODELS (only
 *   LLM_MODEL when it is unset; `*` for any), and only of the operator's provider: the key is never
 *   sent to another provider, whatever prefix `llm_model` carries.
 * - A user who set their own llm_api_key (or llm_base_url) in /api/v1/settings uses any model on it;
 *   their key goes only to their llm_base_url, or to the public API of the model's provider.
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

/**
 * Whether a user may point their LLM at `url` (the worker calls it, so it must not reach inside the
 * deployment). With LLM_USER_BASE_URLS set, only URLs starting with one of its entries (`*`: any);
 * unset, any https URL whose host is not localhost or a loopback, private or link-local address.
 * Returns the reason when not.
 */
export const userBaseUrlRefusal = (url: string, allowed: readonly string[] = []): string | null => {
  if (allowed.length > 0) {
    return allowed.includes("*") || allowed.some((p) => url.startsWith(p))
      ? null
      : "llm_base_url is not among the LLM endpoints this deployment allows (LLM_USER_BASE_URLS)";
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "llm_base_url is not a URL";
  }
  if (parsed.protocol !== "https:") return "llm_base_url must be https";
  const host = parsed.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".internal")) {
    return "llm_base_url must not name a host inside the deployment";
  }
  if (isIP(host) && isNonPublicAddress(host)) {
    return "llm_base_url must not name a loopback, private or link-local address";
  }
  return null;
};
