import {
  isToolCallError,
  type MessageContent,
  type Skill,
  type StoredEvent,
  skillsTriggeredBy,
  textOfContent,
} from "@tern/core";
import type { LlmMessage, ThinkingBlock, ToolCall } from "./llm/types.ts";
import { pathRulesFor, pathRuleText, triggeredSkillText, workspaceRelative } from "./skills.ts";

/** The text of content blocks (image blocks have none). */
export const textOf = (content: readonly MessageContent[]): string => textOfContent(content);

/** The image URLs of content blocks, in order. */
const imagesOf = (content: readonly MessageContent[]): string[] =>
  content.flatMap((c) => (c.type === "image" ? c.image_urls : []));

/** Thinking blocks as stored (OpenHands' signature may be null) to send back as given. */
const thinkingOf = (blocks: readonly StoredThinkingBlock[] | undefined): ThinkingBlock[] =>
  (blocks ?? []).map((b) =>
    b.type === "thinking"
      ? { type: "thinking", thinking: b.thinking, signature: b.signature ?? "" }
      : { type: "redacted_thinking", data: b.data },
  );
type StoredThinkingBlock =
  | { type: "thinking"; thinking: string; signature?: string | null | undefined }
  | { type: "redacted_thinking"; data: string };

/** Message, action, observation and tool-error events: what the conversation is made of, for the model. */
export const isTurnEvent = (e: StoredEvent): boolean =>
  e.kind === "MessageEvent" ||
  e.kind === "ActionEvent" ||
  e.kind === "ObservationEvent" ||
  e.kind === "UserRejectObservation" ||
  isToolCallError(e);

/** Skills with triggers, each added to the first user message that says one of its triggers. */
const skillActivation = (skills: Skill[]) => {
  const active = new Set<string>();
  return (text: string): string => {
    const fresh = skillsTriggeredBy(skills, text).filter((m) => !active.has(m.skill.name));
    for (const m of fresh) active.add(m.skill.name);
    return fresh.length ? `${text}\n\n${fresh.map(triggeredSkillText).join("\n\n")}` : text;
  };
};

/** Path rules, each added to the result of the first call whose `path` is under its folder. */
const pathRuleActivation = (skills: Skill[], workspaceDir: string | undefined) => {
  const active = new Set<string>();
  return (path: unknown, text: string): string => {
    if (!workspaceDir || typeof path !== "string" || !path) return text;
    const relative = workspaceRelative(workspaceDir, path);
    if (!relative) return text;
    const fresh = pathRulesFor(skills, relative).filter((m) => !active.has(m.skill.name));
    for (const m of fresh) active.add(m.skill.name);
    return fresh.length ? `${text}\n\n${fresh.map(pathRuleText).join("\n\n")}` : text;
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
export const buildHistory = (
  events: StoredEvent[],
  skills: Skill[],
  /** Where the conversation's workspace is: path rules match paths relative to it. */
  workspace?: { dir: string },
): History => {
  let system: string | null = null;
  const messages: LlmMessage[] = [];
  const activate = skillActivation(skills);
  const applyPathRules = pathRuleActivation(skills, workspace?.dir);
  const pathOfCall = new Map<string, unknown>();
  let openAssistant: { id: string; message: Extract<LlmMessage, { role: "assistant" }> } | null = null;
  const outstanding = new Set<string>();
  const deferred: LlmMessage[] = [];
  const flush = () => {
    if (outstanding.size === 0) messages.push(...deferred.splice(0));
  };
  /** A user's word (or a summary) waits behind the results still outstanding. */
  const pushUserMessage = (msg: LlmMessage) => {
    if (outstanding.size) deferred.push(msg);
    else messages.push(msg);
  };
  /** A call's result: given after its call, and what waited behind the last result follows it. */
  const answerCall = (toolCallId: string, toolName: string, text: string, isError: boolean, images: string[] = []) => {
    messages.push({ role: "tool", toolCallId, toolName, text, isError, ...(images.length ? { images } : {}) });
    outstanding.delete(toolCallId);
    flush();
  };

  const calls = new Set<string>();
  const addCall = (responseId: string, call: ToolCall, thought: string, thinking: ThinkingBlock[]) => {
    if (!openAssistant || openAssistant.id !== responseId) {
      openAssistant = { id: responseId, message: { role: "assistant", text: thought, toolCalls: [] } };
      messages.push(openAssistant.message);
    }
    // The response's thinking rides on its first call's event; it goes back before the calls.
    if (thinking.length) openAssistant.message.thinkingBlocks = thinking;
    openAssistant.message.toolCalls.push(call);
  };

  for (const e of events) {
    if (e.kind === "CondensationEvent") {
      if (e.payload.summary === null) continue;
      openAssistant = null;
      pushUserMessage({ role: "user", text: condensationSummaryText(e.payload.summary) });
    } else if (e.kind === "SystemPromptEvent") {
      system = e.payload.system_prompt.text;
    } else if (e.kind === "MessageEvent") {
      const text = textOf(e.payload.llm_message.content);
      if (e.payload.llm_message.role === "assistant" || e.source === "agent") {
        openAssistant = null;
        const thinking = thinkingOf(e.payload.llm_message.thinking_blocks);
        messages.push({
          role: "assistant",
          text,
          toolCalls: [],
          ...(thinking.length ? { thinkingBlocks: thinking } : {}),
        });
      } else {
        const images = imagesOf(e.payload.llm_message.content);
        pushUserMessage({ role: "user", text: activate(text), ...(images.length ? { images } : {}) });
      }
    } else if (e.kind === "ActionEvent") {
      const a = e.payload;
      addCall(a.llm_response_id, a.tool_call, textOf(a.thought), thinkingOf(a.thinking_blocks));
      calls.add(a.tool_call_id);
      outstanding.add(a.tool_call_id);
      pathOfCall.set(a.tool_call_id, a.action.path);
    } else if (e.kind === "ObservationEvent") {
      const o = e.payload;
      if (!calls.has(o.tool_call_id)) continue;
      answerCall(
        o.tool_call_id,
        o.tool_name,
        applyPathRules(pathOfCall.get(o.tool_call_id), textOf(o.observation.content)),
        o.observation.is_error === true,
        imagesOf(o.observation.content),
      );
    } else if (e.kind === "UserRejectObservation") {
      // The rejected call's result, in OpenHands' words (UserRejectObservation.to_llm_message).
      const r = e.payload;
      if (!calls.has(r.tool_call_id)) continue;
      answerCall(r.tool_call_id, r.tool_name, `Action rejected: ${r.rejection_reason}`, false);
    } else if (isToolCallError(e)) {
      const t = e.payload;
      addCall(t.llm_response_id, t.tool_call, textOf(t.thought ?? []), thinkingOf(t.thinking_blocks));
      messages.push({ role: "tool", toolCallId: t.tool_call_id, toolName: t.tool_name, text: t.error, isError: true });
    }
  }
  messages.push(...deferred);
  return { system, messages };
};
