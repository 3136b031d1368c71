import type { Skill, StoredEvent } from "@tern/core";
import type { LlmMessage, ToolCall } from "./llm/types.ts";

/** Event payloads the agent writes and reads (DESIGN, Events). */
export interface ActionPayload {
  tool_name: string;
  tool_call_id: string;
  /** The assistant's text that came with the call (on the first call of a response only). */
  thought: { type: "text"; text: string }[];
  /** The validated arguments, with `kind` naming the action (e.g. TerminalAction). */
  action: Record<string, unknown>;
  /** The call as the model wrote it, so the history can be given back to it verbatim. */
  tool_call: ToolCall;
  llm_response_id: string;
  /** The last event sequence number the model had seen when it made this call. */
  history_seq: number;
}

export interface ObservationPayload {
  tool_name: string;
  tool_call_id: string;
  action_id: string;
  observation: { content?: { type: string; text: string }[]; is_error?: boolean } & Record<string, unknown>;
}

/** A call the model got wrong (unknown tool, bad JSON, bad arguments); the model sees `error` as its result. */
export interface ToolErrorPayload {
  tool_name: string;
  tool_call_id: string;
  tool_call: ToolCall;
  llm_response_id: string;
  history_seq: number;
  /** The assistant's text, when this was the first call of its response. */
  thought?: { type: "text"; text: string }[];
  error: string;
}

export const textOf = (content: unknown): string =>
  Array.isArray(content)
    ? content
        .filter((c): c is { type: string; text: string } => !!c && typeof c === "object" && typeof c.text === "string")
        .map((c) => c.text)
        .join("\n")
    : "";

const isToolError = (e: StoredEvent): boolean =>
  e.kind === "AgentErrorEvent" && typeof e.payload.tool_call_id === "string";

/** Message, action, observation and tool-error events: what the conversation is made of, for the model. */
export const isTurnEvent = (e: StoredEvent): boolean =>
  e.kind === "MessageEvent" || e.kind === "ActionEvent" || e.kind === "ObservationEvent" || isToolError(e);

/** Skills with triggers, each added to the first user message that names one of its triggers. */
const skillActivation = (skills: Skill[]) => {
  const active = new Set<string>();
  return (text: string): string => {
    const lower = text.toLowerCase();
    const extra: string[] = [];
    for (const s of skills) {
      if (s.triggers.length === 0 || active.has(s.name)) continue;
      const hit = s.triggers.find((t) => t && lower.includes(t.toLowerCase()));
      if (!hit) continue;
      active.add(s.name);
      extra.push(
        `<EXTRA_INFO>\nThe following information has been included based on a keyword match for "${hit}".\n` +
          `<skill name="${s.name}" source="${s.source}">\n${s.content.trim()}\n</skill>\n</EXTRA_INFO>`,
      );
    }
    return extra.length ? `${text}\n\n${extra.join("\n\n")}` : text;
  };
};

export interface History {
  system: string | null;
  messages: LlmMessage[];
}

/**
 * The model's view of the conversation, rebuilt from the stored events alone. Calls of one LLM
 * response (same llm_response_id) form one assistant message; each gets its result (observation or
 * tool error). A user message that arrived while results were outstanding is given after them, as
 * the providers want results right after their calls.
 */
export const buildHistory = (events: StoredEvent[], skills: Skill[]): History => {
  let system: string | null = null;
  const messages: LlmMessage[] = [];
  const activate = skillActivation(skills);
  let openAssistant: { id: string; message: Extract<LlmMessage, { role: "assistant" }> } | null = null;
  const outstanding = new Set<string>();
  const deferred: LlmMessage[] = [];
  const flush = () => {
    if (outstanding.size === 0) messages.push(...deferred.splice(0));
  };

  const addCall = (responseId: string, call: ToolCall, thought: string) => {
    if (!openAssistant || openAssistant.id !== responseId) {
      openAssistant = { id: responseId, message: { role: "assistant", text: thought, toolCalls: [] } };
      messages.push(openAssistant.message);
    }
    openAssistant.message.toolCalls.push(call);
  };

  for (const e of events) {
    const p = e.payload;
    if (e.kind === "SystemPromptEvent") {
      const sp = p.system_prompt as { text?: string } | string | undefined;
      system = typeof sp === "string" ? sp : (sp?.text ?? system);
    } else if (e.kind === "MessageEvent") {
      const m = p.llm_message as { role?: string; content?: unknown } | undefined;
      const text = textOf(m?.content);
      if (m?.role === "assistant" || e.source === "agent") {
        openAssistant = null;
        messages.push({ role: "assistant", text, toolCalls: [] });
      } else {
        const msg: LlmMessage = { role: "user", text: activate(text) };
        if (outstanding.size) deferred.push(msg);
        else messages.push(msg);
      }
    } else if (e.kind === "ActionEvent") {
      const a = p as unknown as ActionPayload;
      addCall(a.llm_response_id, a.tool_call, textOf(a.thought));
      outstanding.add(a.tool_call_id);
    } else if (e.kind === "ObservationEvent") {
      const o = p as unknown as ObservationPayload;
      messages.push({
        role: "tool",
        toolCallId: o.tool_call_id,
        toolName: o.tool_name,
        text: textOf(o.observation?.content),
        isError: o.observation?.is_error === true,
      });
      outstanding.delete(o.tool_call_id);
      flush();
    } else if (isToolError(e)) {
      const t = p as unknown as ToolErrorPayload;
      addCall(t.llm_response_id, t.tool_call, textOf(t.thought));
      messages.push({ role: "tool", toolCallId: t.tool_call_id, toolName: t.tool_name, text: t.error, isError: true });
    }
  }
  messages.push(...deferred);
  return { system, messages };
};
