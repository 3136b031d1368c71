import { type SecurityRisk, type SystemPromptTool, securityRisks } from "@tern/core";
import { z } from "zod";
import type { ToolDefinition } from "../llm/types.ts";
import { builtInTools } from "./registry.ts";

export { isToolName, type ToolArgs, type ToolName, toolArgs } from "./registry.ts";

const jsonSchemaOf = (schema: z.ZodType): Record<string, unknown> => {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: "input" }) as Record<string, unknown>;
  return rest;
};

/**
 * The two fields every tool call carries, as OpenHands' do: the model's judgement of
 * the call's risk, and a few words on what it does. Taken off the arguments before the tool's own
 * schema checks them (callMeta), stored on the ActionEvent, read by the confirmation policy.
 */
const callMetaProperties = {
  security_risk: {
    type: "string",
    enum: ["LOW", "MEDIUM", "HIGH"],
    description:
      "How risky this call is. LOW: reads or changes nothing that matters (viewing files, listing, tests). " +
      "MEDIUM: changes the workspace in ways that are easy to undo (editing files, installing packages). " +
      "HIGH: hard to undo or reaches outside (deleting data, force-pushing, sending data out, changing system " +
      "files, running code from the internet).",
  },
  summary: { type: "string", description: "What this call does, in about ten words, for the user to read." },
} as const;

/**
 * A tool's JSON Schema with `security_risk` and `summary` added: every tool offered to the model
 * goes through it, MCP tools too, so the policy can judge any call. A tool whose own schema has a
 * field of that name keeps it.
 */
export const withCallMeta = (parameters: Record<string, unknown>): Record<string, unknown> => {
  const properties = (parameters.properties ?? {}) as Record<string, unknown>;
  const required = Array.isArray(parameters.required) ? (parameters.required as string[]) : [];
  const added = Object.keys(callMetaProperties).filter((k) => !(k in properties));
  return {
    ...parameters,
    type: "object",
    properties: {
      ...properties,
      ...Object.fromEntries(added.map((k) => [k, callMetaProperties[k as keyof typeof callMetaProperties]])),
    },
    required: [...required, ...added],
  };
};

/**
 * The risk and summary of a call, taken off its arguments (which are changed in place): a missing
 * or unknown risk is UNKNOWN; a missing summary is made from the tool's name and arguments, as
 * OpenHands makes it. A field the tool's own schema declares (`own`) is read, not taken off.
 */
export const takeCallMeta = (
  toolName: string,
  args: Record<string, unknown>,
  own: ReadonlySet<string> = new Set(),
): { security_risk: SecurityRisk; summary: string } => {
  const risk = args.security_risk;
  const summary = args.summary;
  if (!own.has("security_risk")) delete args.security_risk;
  if (!own.has("summary")) delete args.summary;
  const level = typeof risk === "string" ? risk.trim().toUpperCase() : "";
  return {
    security_risk: (securityRisks as readonly string[]).includes(level) ? (level as SecurityRisk) : "UNKNOWN",
    summary:
      typeof summary === "string" && summary.trim()
        ? summary.trim().slice(0, 500)
        : `${toolName}: ${JSON.stringify(args)}`.slice(0, 500),
  };
};

/** The tools offered to the model, in OpenHands' names; also stored in the SystemPromptEvent. */
export const toolDefinitions: ToolDefinition[] = builtInTools.map((t) => ({
  name: t.name,
  description: t.description,
  parameters: withCallMeta(jsonSchemaOf(t.args)),
}));

/** Tool definitions in the shape the SystemPromptEvent stores them (OpenAI's function tools). */
export const systemPromptTools = (): SystemPromptTool[] =>
  toolDefinitions.map((t) => ({
    type: "function",
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
