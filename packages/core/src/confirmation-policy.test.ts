import { describe, expect, it } from "vitest";
import {
  type ConfirmationPolicy,
  confirmationPolicySchema,
  policyFromSettings,
  requiresConfirmation,
  shouldConfirm,
} from "./confirmation-policy.ts";
import type { SecurityRisk } from "./events.ts";

const risks: SecurityRisk[] = ["LOW", "MEDIUM", "HIGH", "UNKNOWN"];
const never: ConfirmationPolicy = { kind: "NeverConfirm" };
const always: ConfirmationPolicy = { kind: "AlwaysConfirm" };
const risky = (threshold: "LOW" | "MEDIUM" | "HIGH", confirm_unknown = true): ConfirmationPolicy => ({
  kind: "ConfirmRisky",
  threshold,
  confirm_unknown,
});

describe("confirmation policies (OpenHands' table)", () => {
  it.each([
    ["NeverConfirm", never, [false, false, false, false]],
    ["AlwaysConfirm", always, [true, true, true, true]],
    ["ConfirmRisky HIGH (the default)", risky("HIGH"), [false, false, true, true]],
    ["ConfirmRisky MEDIUM", risky("MEDIUM"), [false, true, true, true]],
    ["ConfirmRisky LOW", risky("LOW"), [true, true, true, true]],
    ["ConfirmRisky HIGH, unknown allowed", risky("HIGH", false), [false, false, true, false]],
  ] as const)("%s stops on LOW, MEDIUM, HIGH, UNKNOWN as %j", (_name, policy, expected) => {
    expect(risks.map((r) => shouldConfirm(policy, r))).toEqual(expected);
  });

  it("parses OpenHands' kinds and the short names, with ConfirmRisky's defaults; UNKNOWN is no threshold", () => {
    expect(confirmationPolicySchema.parse({ kind: "ConfirmRisky" })).toEqual(risky("HIGH"));
    expect(confirmationPolicySchema.parse({ kind: "risky", threshold: "MEDIUM" })).toEqual(risky("MEDIUM"));
    expect(confirmationPolicySchema.parse({ kind: "never" })).toEqual(never);
    expect(confirmationPolicySchema.parse({ kind: "AlwaysConfirm" })).toEqual(always);
    expect(confirmationPolicySchema.safeParse({ kind: "ConfirmRisky", threshold: "UNKNOWN" }).success).toBe(false);
    expect(confirmationPolicySchema.safeParse({ kind: "sometimes" }).success).toBe(false);
  });

  it("takes the settings as OpenHands' app server does", () => {
    expect(policyFromSettings({ confirmationMode: false, securityAnalyzer: "llm" })).toEqual(never);
    expect(policyFromSettings({ confirmationMode: true, securityAnalyzer: "llm" })).toEqual(risky("HIGH"));
    expect(policyFromSettings({ confirmationMode: true, securityAnalyzer: "none" })).toEqual(always);
  });

  it("confirms a response as a whole; a lone finish or think never waits; an always-confirm tool always does", () => {
    const call = (tool_name: string, security_risk: SecurityRisk, always_confirm = false) => ({
      tool_name,
      security_risk,
      always_confirm,
    });
    expect(requiresConfirmation(always, [])).toBe(false);
    expect(requiresConfirmation(always, [call("finish", "HIGH")])).toBe(false);
    expect(requiresConfirmation(always, [call("think", "UNKNOWN")])).toBe(false);
    expect(requiresConfirmation(always, [call("think", "LOW"), call("terminal", "LOW")])).toBe(true);
    expect(requiresConfirmation(risky("HIGH"), [call("terminal", "LOW"), call("terminal", "HIGH")])).toBe(true);
    expect(requiresConfirmation(risky("HIGH"), [call("terminal", "LOW"), call("file_editor", "MEDIUM")])).toBe(false);
    // An MCP server marked always-confirm: its calls wait even under NeverConfirm.
    expect(requiresConfirmation(never, [call("github__create_issue", "LOW", true)])).toBe(true);
    expect(requiresConfirmation(never, [call("github__create_issue", "HIGH")])).toBe(false);
  });

  it("a local analyzer's rating raises the model's label under ConfirmRisky, and never lowers it", () => {
    const call = (security_risk: SecurityRisk, analyzed_risk: "LOW" | "MEDIUM" | "HIGH") => ({
      tool_name: "terminal",
      security_risk,
      analyzed_risk,
    });
    // A model that labels `rm -rf /` LOW: the analyzer's HIGH stops it.
    expect(requiresConfirmation(risky("HIGH"), [call("LOW", "HIGH")])).toBe(true);
    expect(requiresConfirmation(risky("MEDIUM"), [call("LOW", "MEDIUM")])).toBe(true);
    expect(requiresConfirmation(risky("HIGH"), [call("LOW", "MEDIUM")])).toBe(false);
    // The analyzer's LOW lowers nothing: the model's HIGH, or its missing label, still waits.
    expect(requiresConfirmation(risky("HIGH"), [call("HIGH", "LOW")])).toBe(true);
    expect(requiresConfirmation(risky("HIGH"), [call("UNKNOWN", "LOW")])).toBe(true);
    expect(requiresConfirmation(risky("HIGH", false), [call("UNKNOWN", "HIGH")])).toBe(true);
    // NeverConfirm stays never.
    expect(requiresConfirmation(never, [call("LOW", "HIGH")])).toBe(false);
  });
});
