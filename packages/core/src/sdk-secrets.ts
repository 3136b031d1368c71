import { sdkSecretGraph } from "./sdk-secret-graph.ts";

/**
 * The secrets of an OpenHands SDK StartConversationRequest (its agent's LLM keys and header maps,
 * its condensers', its critic's, its context's secrets, its MCP servers' env, headers and auth, its
 * secret sources), found by the SDK's own models: `sdkSecretGraph`, generated from the committed
 * agent-server contract, says which fields hold one. Nothing here names a field by hand.
 */

/** What a client reads back for a secret it gave (pydantic's SecretStr as the agent server shows it). */
export const SDK_MASKED_SECRET = "**********";

interface Rule {
  readonly kind?: string;
  readonly model?: string;
  readonly secret?: "value" | "map";
  readonly items?: Rule;
  readonly values?: Rule;
  readonly options?: readonly Rule[];
}

const models = sdkSecretGraph.models as unknown as Record<string, Record<string, Rule>>;
const subclasses = sdkSecretGraph.subclasses as unknown as Record<string, readonly string[]>;

/** The models an object of `model` may be: the one its `kind` names, else (no or unknown kind) all of them. */
const candidates = (model: string, value: Record<string, unknown>): string[] => {
  const subs = subclasses[model] ?? [];
  const kind = value.kind;
  if (typeof kind === "string" && (kind === model || subs.includes(kind))) return [kind];
  return [model, ...subs];
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A walk that masks every secret it meets and hands each one's path and text to `found`. */
const walker = (found: (path: string, value: string) => void) => {
  const hide = (path: string, v: unknown): unknown => {
    if (v === null || v === undefined) return v;
    found(path, typeof v === "string" ? v : JSON.stringify(v));
    return SDK_MASKED_SECRET;
  };

  const byRule = (rule: Rule, v: unknown, path: string): unknown => {
    if (v === null || v === undefined) return v;
    if (rule.secret === "value") return hide(path, v);
    if (rule.secret === "map") {
      if (!isObject(v)) return hide(path, v);
      return Object.fromEntries(
        Object.entries(v).map(([k, entry]) => [
          k,
          // A secret source ({kind: StaticSecret, value}) is walked by its model; anything else is the secret.
          isObject(entry) && rule.values ? byRule(rule.values, entry, `${path}.${k}`) : hide(`${path}.${k}`, entry),
        ]),
      );
    }
    let out: unknown = v;
    if (rule.model && isObject(out)) out = byModel(rule.model, out, path);
    if (rule.items && Array.isArray(out)) out = out.map((item, i) => byRule(rule.items!, item, `${path}[${i}]`));
    if (rule.values && isObject(out)) {
      out = Object.fromEntries(Object.entries(out).map(([k, e]) => [k, byRule(rule.values!, e, `${path}.${k}`)]));
    }
    for (const option of rule.options ?? []) out = byRule(option, out, path);
    return out;
  };

  const byModel = (model: string, value: Record<string, unknown>, path: string): Record<string, unknown> => {
    let out = value;
    for (const m of candidates(model, value)) {
      for (const [field, rule] of Object.entries(models[m] ?? {})) {
        if (!(field in out)) continue;
        const next = byRule(rule, out[field], path ? `${path}.${field}` : field);
        if (next !== out[field]) out = { ...out, [field]: next };
      }
    }
    return out;
  };

  return byModel;
};

/** Which SDK model a walk starts from: a whole start request, or its `agent`. */
export type SdkSecretRoot = "StartConversationRequest" | "AgentBase";

/**
 * `value` with every secret the SDK's models mark replaced by `**********` (a copy: `value` is not
 * changed), and each secret found, by its path (`agent.llm.api_key`).
 */
export const maskSdkSecrets = <T>(
  value: T,
  root: SdkSecretRoot,
): { masked: T; secrets: { path: string; value: string }[] } => {
  const secrets: { path: string; value: string }[] = [];
  const walk = walker((path, v) => secrets.push({ path, value: v }));
  const masked = isObject(value) ? (walk(root, value, "") as T) : value;
  return { masked, secrets };
};
