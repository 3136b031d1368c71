import { randomBytes } from "node:crypto";
import type { LlmClient, LlmMessage, LlmRequest, LlmResponse, ToolCall, ToolDefinition } from "./types.ts";

/**
 * Tool calls for models without native ones, as OpenHands' non_native_fc does it
 * (openhands-sdk's llm/mixins/fn_call_converter.py): the tools are described in the system prompt,
 * a call is written in the reply as
 *
 *   <function=terminal>
 *   <parameter=command>ls</parameter>
 *   </function>
 *
 * and parsed back into a ToolCall; past calls are given back in that form, and their results as
 * user messages ("EXECUTION RESULT of [terminal]:"). The loop sees native calls either way.
 */

type JsonSchema = { type?: unknown; description?: unknown; enum?: unknown[]; properties?: unknown; required?: unknown };

const typeOf = (schema: JsonSchema): string => {
  if (typeof schema.type === "string") return schema.type;
  if (Array.isArray(schema.type)) return schema.type.join(" | ");
  return "string";
};

/** OpenHands' convert_tools_to_description: each tool, its parameters with their types and whether required. */
const describeTools = (tools: readonly ToolDefinition[]): string =>
  tools
    .map((tool, i) => {
      const properties = (tool.parameters.properties ?? {}) as Record<string, JsonSchema>;
      const required = new Set(Array.isArray(tool.parameters.required) ? (tool.parameters.required as string[]) : []);
      const params = Object.entries(properties).map(([name, schema], j) => {
        const enumText = Array.isArray(schema.enum)
          ? `\nAllowed values: [${schema.enum.map((v) => `\`${String(v)}\``).join(", ")}]`
          : "";
        const description = typeof schema.description === "string" ? schema.description : "No description provided";
        const status = required.has(name) ? "required" : "optional";
        return `  (${j + 1}) ${name} (${typeOf(schema)}, ${status}): ${description}${enumText}`;
      });
      return [
        `---- BEGIN FUNCTION #${i + 1}: ${tool.name} ----`,
        `Description: ${tool.description}`,
        params.length ? `Parameters:\n${params.join("\n")}` : "No parameters are required for this function.",
        `---- END FUNCTION #${i + 1} ----`,
      ].join("\n");
    })
    .join("\n\n");

/** OpenHands' system_message_suffix_TEMPLATE, with the tools described. */
const toolsPrompt = (tools: readonly ToolDefinition[]): string => `
You have access to the following functions:

${describeTools(tools)}

If you choose to call a function ONLY reply in the following format with NO suffix:

<function=example_function_name>
<parameter=example_parameter_1>value_1</parameter>
<parameter=example_parameter_2>
This is the value for the second parameter
that can span
multiple lines
</parameter>
</function>

<IMPORTANT>
Reminder:
- Function calls MUST follow the specified format, start with <function= and end with </function>
- Required parameters MUST be specified
- Only call one function at a time
- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after.
- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls
</IMPORTANT>
`;

/** A past call in the reply's form (OpenHands' convert_tool_call_to_string). */
export const callText = (call: ToolCall): string => {
  let args: unknown;
  try {
    args = JSON.parse(call.arguments || "{}");
  } catch {
    args = null;
  }
  const entries =
    args && typeof args === "object" && !Array.isArray(args)
      ? Object.entries(args as Record<string, unknown>)
      : [["arguments", call.arguments] as const];
  const params = entries.map(([name, value]) => {
    const rendered = typeof value === "string" ? value : JSON.stringify(value);
    return typeof value === "string" && value.includes("\n")
      ? `<parameter=${name}>\n${rendered}\n</parameter>`
      : `<parameter=${name}>${rendered}</parameter>`;
  });
  return [`<function=${call.name}>`, ...params, "</function>"].join("\n");
};

/** The conversation with calls written out and results as user messages: no tool message, no native call. */
export const withoutNativeCalls = (messages: readonly LlmMessage[]): LlmMessage[] =>
  messages.map((m): LlmMessage => {
    if (m.role === "tool") return { role: "user", text: `EXECUTION RESULT of [${m.toolName}]:\n${m.text}` };
    if (m.role !== "assistant" || m.toolCalls.length === 0) return m;
    const calls = m.toolCalls.map(callText).join("\n\n");
    return { ...m, text: m.text ? `${m.text}\n\n${calls}` : calls, toolCalls: [] };
  });

const FUNCTION = /<function=([^>\s]+)>\n?([\s\S]*?)<\/function>/g;
const PARAMETER = /<parameter=([^>\s]+)>([\s\S]*?)<\/parameter>/g;

/** A parameter's text as its schema's type: numbers, booleans, arrays and objects parsed; strings kept. */
const parameterValue = (text: string, schema: JsonSchema | undefined): unknown => {
  // A value on lines of its own is written with a newline on each side of it (callText).
  const value = text.replace(/^\n/, "").replace(/\n$/, "");
  const type = schema ? typeOf(schema) : "string";
  if (type === "string") return value;
  const trimmed = value.trim();
  if (type === "integer" || type === "number") {
    const n = Number(trimmed);
    return trimmed !== "" && Number.isFinite(n) ? n : value;
  }
  if (type === "boolean") return trimmed === "true" ? true : trimmed === "false" ? false : value;
  try {
    return JSON.parse(trimmed);
  } catch {
    return value; // the tool's own check says what is wrong
  }
};

/**
 * A reply's calls, in order, and its text before the first (OpenHands' _fix_stopword too: a last
 * call whose `</function>` is missing is closed).
 */
export const parseCalls = (
  reply: string,
  tools: readonly ToolDefinition[],
  newId: () => string = () => `call_${randomBytes(12).toString("hex")}`,
): { text: string; toolCalls: ToolCall[] } => {
  let content = reply.replace(/<\/?tool_call>\s*/g, "").replace(/<\/think>\s*(?=<function=)/g, "");
  const opened = content.lastIndexOf("<function=");
  if (opened !== -1 && !content.slice(opened).includes("</function>")) {
    content = content.endsWith("</") ? `${content}function>` : `${content}\n</function>`;
  }
  const toolCalls: ToolCall[] = [];
  for (const match of content.matchAll(FUNCTION)) {
    const name = match[1] ?? "";
    const schema = tools.find((t) => t.name === name)?.parameters.properties as Record<string, JsonSchema> | undefined;
    const args: Record<string, unknown> = {};
    for (const p of (match[2] ?? "").matchAll(PARAMETER)) {
      const param = p[1] ?? "";
      args[param] = parameterValue(p[2] ?? "", schema?.[param]);
    }
    toolCalls.push({ id: newId(), name, arguments: JSON.stringify(args) });
  }
  const first = content.indexOf("<function=");
  return { text: (first === -1 ? content : content.slice(0, first)).trim(), toolCalls };
};

/** `client` for a model without native tool calls: tools in the prompt, calls parsed from the reply. */
export const withPromptToolCalls = (client: LlmClient): LlmClient => ({
  provider: client.provider,
  model: client.model,
  async complete(request: LlmRequest, signal, hooks): Promise<LlmResponse> {
    if (request.tools.length === 0) return client.complete(request, signal, hooks);
    const response = await client.complete(
      {
        ...request,
        system: `${request.system}\n${toolsPrompt(request.tools)}`,
        messages: withoutNativeCalls(request.messages),
        tools: [],
      },
      signal,
      hooks,
    );
    // A reply cut by the length limit is not run: its last call is not closed by us into a whole one.
    if (response.truncated) return response;
    const parsed = parseCalls(response.text, request.tools);
    return { ...response, text: parsed.text, toolCalls: [...response.toolCalls, ...parsed.toolCalls] };
  },
});
