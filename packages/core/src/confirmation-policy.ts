import { z } from "zod";
import type { SecurityRisk } from "./events.ts";

/**
 * Confirmation mode: which tool calls wait for the user's answer before they run.
 * OpenHands' three policies and its rules (openhands/sdk/security/confirmation_policy.py and
 * Agent._requires_user_confirmation), written once here for the API (which validates a policy)
 * and the agent (which applies it to every tool call, ours and MCP's alike).
 */

const concreteRisks = ["LOW", "MEDIUM", "HIGH"] as const;
const riskOrder: Record<(typeof concreteRisks)[number], number> = { LOW: 1, MEDIUM: 2, HIGH: 3 };

/** Short names (never, always, risky), accepted beside OpenHands' class names. */
const kindAliases: Record<string, ConfirmationPolicy["kind"]> = {
  never: "NeverConfirm",
  always: "AlwaysConfirm",
  risky: "ConfirmRisky",
};

export const confirmationPolicySchema = z
  .preprocess(
    (v) =>
      v && typeof v === "object" && "kind" in v && typeof v.kind === "string" && kindAliases[v.kind]
        ? { ...v, kind: kindAliases[v.kind] }
        : v,
    z.discriminatedUnion("kind", [
      z.object({ kind: z.literal("NeverConfirm") }),
      z.object({ kind: z.literal("AlwaysConfirm") }),
      z.object({
        kind: z.literal("ConfirmRisky"),
        threshold: z
          .enum(concreteRisks)
          .default("HIGH")
          .meta({ description: "Calls at this risk or above wait for confirmation (UNKNOWN is not a threshold)" }),
        confirm_unknown: z
          .boolean()
          .default(true)
          .meta({ description: "Whether a call of unknown risk (none given, or not a level) waits too" }),
      }),
    ]),
  )
  .meta({
    id: "ConfirmationPolicy",
    description:
      "OpenHands' policies: NeverConfirm, AlwaysConfirm, ConfirmRisky (threshold, confirm_unknown). " +
      "`never`, `always` and `risky` are accepted for the same.",
  });

export type ConfirmationPolicy =
  | { kind: "NeverConfirm" }
  | { kind: "AlwaysConfirm" }
  | { kind: "ConfirmRisky"; threshold: "LOW" | "MEDIUM" | "HIGH"; confirm_unknown: boolean };

export const securityAnalyzers = ["llm", "none"] as const;
export type SecurityAnalyzer = (typeof securityAnalyzers)[number];

/** Whether a call of this risk waits, under this policy (OpenHands' should_confirm). */
export const shouldConfirm = (policy: ConfirmationPolicy, risk: SecurityRisk): boolean => {
  if (policy.kind === "NeverConfirm") return false;
  if (policy.kind === "AlwaysConfirm") return true;
  if (risk === "UNKNOWN") return policy.confirm_unknown;
  return riskOrder[risk] >= riskOrder[policy.threshold];
};

/**
 * The policy of a user's settings, as OpenHands' app server picks it: confirmation mode off is
 * NeverConfirm; on, with the LLM judging risk, ConfirmRisky (HIGH and unknown); on, with no
 * analyzer (no risk to go by), AlwaysConfirm.
 */
export const policyFromSettings = (settings: {
  confirmationMode: boolean;
  securityAnalyzer: SecurityAnalyzer;
}): ConfirmationPolicy => {
  if (!settings.confirmationMode) return { kind: "NeverConfirm" };
  if (settings.securityAnalyzer === "none") return { kind: "AlwaysConfirm" };
  return { kind: "ConfirmRisky", threshold: "HIGH", confirm_unknown: true };
};

/** One tool call of a response, as the policy sees it. */
export interface CallToConfirm {
  tool_name: string;
  security_risk: SecurityRisk;
  /** The tool asks for confirmation whatever the policy (e.g. an MCP server marked always-confirm). */
  always_confirm?: boolean;
  /**
   * The risk a local analyzer gives the call, beside the model's label: it may raise the label,
   * never lower it (a call either rating would stop, stops).
   */
  analyzed_risk?: "LOW" | "MEDIUM" | "HIGH";
}

/** Tools that change nothing: a response of one such call alone never waits (OpenHands' rule). */
const harmlessAlone: ReadonlySet<string> = new Set(["finish", "think"]);

/**
 * Whether a response's calls wait for the user: all of them, or none (OpenHands confirms a
 * response as a whole). A single `finish` or `think` never waits; a tool marked always-confirm
 * always does, whatever the policy; otherwise any call the policy confirms, by the model's label
 * or the analyzer's, whichever is higher, makes them all wait.
 */
export const requiresConfirmation = (policy: ConfirmationPolicy, calls: readonly CallToConfirm[]): boolean => {
  if (calls.length === 0) return false;
  if (calls.length === 1 && harmlessAlone.has((calls[0] as CallToConfirm).tool_name)) return false;
  return calls.some(
    (c) =>
      c.always_confirm === true ||
      shouldConfirm(policy, c.security_risk) ||
      (c.analyzed_risk !== undefined && shouldConfirm(policy, c.analyzed_risk)),
  );
};
