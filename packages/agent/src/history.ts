import { isToolCallError, type MessageContent, type Skill, type StoredEvent, textOfContent } from "@tern/core";
import type { LlmMessage, ToolCall } from "./llm/types.ts";

/** The text of content blocks (image blocks have none). */
export const textOf = (content: readonly MessageContent[]): string => textOfContent(content);

/** The image URLs of content blocks, in order. */
const imagesOf = (content: readonly MessageContent[]): string[] =>
  content.flatMap((c) => (c.type === "image" ? c.image_urls : []));

/** Message, action, observation and tool-error events: what the conversation is made of, for the model. */
export const isTurnEvent = (e: StoredEvent): boolean =>
  e.kind === "MessageEvent" || e.kind === "ActionEvent" || e.kind === "ObservationEvent" || isToolCallError(e);

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

/** What the model reads in place of the events a condensation forgot. */
export const condensationSummaryText = (summary: string): string =>
  `<CONVERSATION_SUMMARY>\nEarlier events of this conversation were condensed to make room; this summary takes their place.\n\n${summary}\n</CONVERSATION_SUMMARY>`;

/**
 * The model's view of the conversation, rebuilt from the stored events alone. Calls of one LLM
 * response (same llm_response_id) form one assistant message; each gets its result (observation or
 * tool error). A user message that arrived while results were outstanding is given after them, as
 * the providers want results right after their calls. Given a view with condensations (viewOf), a
 * CondensationEvent is its summary, read as a user message; a result whose call was forgotten is
 * dropped (providers refuse a result without its call).
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

  const calls = new Set<string>();
  const addCall = (responseId: string, call: ToolCall, thought: string) => {
    if (!openAssistant || openAssistant.id !== responseId) {
      openAssistant = { id: responseId, message: { role: "assistant", text: thought, toolCalls: [] } };
      messages.push(openAssistant.message);
    }
    openAssistant.message.toolCalls.push(call);
  };

  for (const e of events) {
    if (e.kind === "CondensationEvent") {
      if (e.payload.summary === null) continue;
      openAssistant = null;
      const msg: LlmMessage = { role: "user", text: condensationSummaryText(e.payload.summary) };
      if (outstanding.size) deferred.push(msg);
      else messages.push(msg);
    } else if (e.kind === "SystemPromptEvent") {
      system = e.payload.system_prompt.text;
    } else if (e.kind === "MessageEvent") {
      const text = textOf(e.payload.llm_message.content);
      if (e.payload.llm_message.role === "assistant" || e.source === "agent") {
        openAssistant = null;
        messages.push({ role: "assistant", text, toolCalls: [] });
      } else {
        const images = imagesOf(e.payload.llm_message.content);
        const msg: LlmMessage = { role: "user", text: activate(text), ...(images.length ? { images } : {}) };
        if (outstanding.size) deferred.push(msg);
        else messages.push(msg);
      }
    } else if (e.kind === "ActionEvent") {
      const a = e.payload;
      addCall(a.llm_response_id, a.tool_call, textOf(a.thought));
      calls.add(a.tool_call_id);
      outstanding.add(a.tool_call_id);
    } else if (e.kind === "ObservationEvent") {
      const o = e.payload;
      if (!calls.has(o.tool_call_id)) continue;
      messages.push({
        role: "tool",
        toolCallId: o.tool_call_id,
        toolName: o.tool_name,
        text: textOf(o.observation.content),
        isError: o.observation.is_error === true,
      });
      outstanding.delete(o.tool_call_id);
      flush();
    } else if (isToolCallError(e)) {
      const t = e.payload;
      addCall(t.llm_response_id, t.tool_call, textOf(t.thought ?? []));
      messages.push({ role: "tool", toolCallId: t.tool_call_id, toolName: t.tool_name, text: t.error, isError: true });
    }
  }
  messages.push(...deferred);
  return { system, messages };
};
