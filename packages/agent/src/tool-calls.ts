import { randomUUID } from "node:crypto";
import { type EventDraftOf, newEvent } from "@tern/core";
import type { z } from "zod";
import { reasoningOf } from "./llm/run-events.ts";
import type { LlmResponse, ToolCall, ToolDefinition } from "./llm/types.ts";
import type { McpToolSet } from "./mcp/session.ts";
import { isToolName, takeCallMeta, toolArgs, toolDefinitions } from "./tools/definitions.ts";
import { toolNamed } from "./tools/registry.ts";

const issuesText = (error: z.ZodError): string =>
  error.issues.map((i) => `${i.path.length ? `${i.path.join(".")}: ` : ""}${i.message}`).join("; ");

/** Some OpenAI-compatible servers send calls without ids, or the same id twice: every call needs its own. */
const withUniqueIds = (calls: ToolCall[]): ToolCall[] => {
  const seen = new Set<string>();
  return calls.map((c) => {
    const id = c.id && !seen.has(c.id) ? c.id : `call_${randomUUID().replaceAll("-", "")}`;
    seen.add(id);
    return id === c.id ? c : { ...c, id };
  });
};

/** One event per tool call of a response: an ActionEvent, or an AgentErrorEvent the model will read. */
export const toolCallEvents = (
  response: LlmResponse,
  responseId: string,
  historySeq: number,
  mcp?: Pick<McpToolSet, "has" | "definitions" | "argumentNames">,
  builtIn: readonly ToolDefinition[] = toolDefinitions,
): EventDraftOf<"ActionEvent" | "AgentErrorEvent">[] =>
  withUniqueIds(response.toolCalls).map((call: ToolCall, i) => {
    const thought = i === 0 && response.text ? [{ type: "text" as const, text: response.text }] : [];
    // The response's reasoning rides on its first call, as OpenHands' ActionEvent carries it.
    const reasoning = i === 0 ? reasoningOf(response) : {};
    const fail = (error: string) =>
      newEvent.toolCallError({
        tool_name: call.name,
        tool_call_id: call.id,
        tool_call: call,
        llm_response_id: responseId,
        history_seq: historySeq,
        thought,
        ...reasoning,
        error,
      });
    const isMcp = mcp?.has(call.name) === true;
    if ((!isToolName(call.name) || !builtIn.some((t) => t.name === call.name)) && !isMcp) {
      const names = [...builtIn, ...(mcp?.definitions ?? [])].map((t) => t.name);
      return fail(`Unknown tool "${call.name}". The tools are: ${names.join(", ")}.`);
    }
    let raw: unknown;
    try {
      raw = call.arguments.trim() === "" ? {} : JSON.parse(call.arguments);
    } catch (err) {
      return fail(`The arguments of ${call.name} are not valid JSON (${(err as Error).message}). Send a JSON object.`);
    }
    // security_risk and summary are every call's, not the tool's: taken off before its schema checks
    // (an MCP tool whose own schema declares one keeps it, and it is read from there).
    const meta =
      raw && typeof raw === "object" && !Array.isArray(raw)
        ? takeCallMeta(call.name, raw as Record<string, unknown>, isMcp ? mcp?.argumentNames(call.name) : undefined)
        : { security_risk: "UNKNOWN" as const, summary: `${call.name}: ${call.arguments}`.slice(0, 500) };
    if (isMcp || !isToolName(call.name)) {
      // An MCP tool's arguments go to its server as they are (OpenHands' MCPToolAction.data); the
      // server checks them against its schema and says what is wrong.
      if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
        return fail(`The arguments of ${call.name} must be a JSON object.`);
      }
      return newEvent.action({
        tool_name: call.name,
        tool_call_id: call.id,
        thought,
        ...reasoning,
        action: { kind: "MCPToolAction", data: raw as Record<string, unknown> },
        tool_call: call,
        llm_response_id: responseId,
        history_seq: historySeq,
        ...meta,
      });
    }
    const parsed = toolArgs[call.name].safeParse(raw);
    if (!parsed.success) return fail(`Invalid arguments for ${call.name}: ${issuesText(parsed.error)}.`);
    return newEvent.action({
      tool_name: call.name,
      tool_call_id: call.id,
      thought,
      ...reasoning,
      action: { kind: toolNamed(call.name).traits.actionKind, ...parsed.data },
      tool_call: call,
      llm_response_id: responseId,
      history_seq: historySeq,
      ...meta,
    });
  });
