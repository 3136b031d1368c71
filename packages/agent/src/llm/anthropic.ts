import Anthropic from "@anthropic-ai/sdk";
import type { ContentBlockParam, ImageBlockParam, MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { withCacheBreakpoints } from "./cache-anthropic.ts";
import { llmFailureOf } from "./context-errors.ts";
import {
  type LlmClient,
  type LlmMessage,
  type LlmRequest,
  type LlmResponse,
  type SdkClientOptions,
  sdkConstructorOptions,
  type ThinkingBlock,
  type ToolCall,
} from "./types.ts";
import { imagesFor } from "./vision.ts";

export interface AnthropicClientOptions extends SdkClientOptions {
  /** `max_tokens`: the model's maximum output (the model table, or LLM_MAX_OUTPUT_TOKENS). */
  maxTokens: number;
  /** Extended thinking's `budget_tokens`; 0 or absent: no thinking. Kept below `maxTokens`. */
  thinkingBudget?: number;
}

/** Anthropic's least thinking budget (ThinkingConfigEnabled: "Must be ≥1024 and less than `max_tokens`"). */
const MIN_THINKING_BUDGET = 1024;

/**
 * The `thinking` of a request: the budget asked for, below `max_tokens` (whose room it shares with
 * the answer: a budget that would leave the answer less than a quarter is cut to leave it that),
 * or nothing when there is no room for Anthropic's least budget.
 */
export const thinkingConfig = (
  budget: number | undefined,
  maxTokens: number,
): { type: "enabled"; budget_tokens: number } | null => {
  if (!budget || budget <= 0) return null;
  const room = Math.floor(maxTokens * 0.75);
  const tokens = Math.min(Math.max(budget, MIN_THINKING_BUDGET), room);
  return tokens >= MIN_THINKING_BUDGET && tokens < maxTokens ? { type: "enabled", budget_tokens: tokens } : null;
};

const parseInput = (args: string): Record<string, unknown> => {
  try {
    const v = JSON.parse(args);
    return v && typeof v === "object" && !Array.isArray(v) ? v : { value: v };
  } catch {
    // A malformed call is answered with an error result; the request must still be well formed.
    return { malformed_arguments: args };
  }
};

const DATA_URL = /^data:(image\/[a-z0-9.+-]+);base64,(.*)$/is;

/** An image part: Anthropic takes a URL, or a data: URL's bytes as a base64 source. */
const imageBlock = (url: string): ImageBlockParam => {
  const data = DATA_URL.exec(url);
  if (!data) return { type: "image", source: { type: "url", url } };
  return {
    type: "image",
    source: {
      type: "base64",
      media_type: (data[1] ?? "image/png").toLowerCase() as "image/png",
      data: data[2] ?? "",
    },
  };
};

const blocksOf = (m: LlmMessage, thinking: boolean): ContentBlockParam[] => {
  switch (m.role) {
    case "user":
      return [{ type: "text", text: m.text }, ...(m.images ?? []).map(imageBlock)];
    case "assistant":
      return [
        // Thinking first, exactly as given (a changed block is refused); only while thinking is on.
        ...(thinking ? (m.thinkingBlocks ?? []).map((b): ContentBlockParam => ({ ...b })) : []),
        ...(m.text ? [{ type: "text" as const, text: m.text }] : []),
        ...m.toolCalls.map((c) => ({
          type: "tool_use" as const,
          id: c.id,
          name: c.name,
          input: parseInput(c.arguments),
        })),
      ];
    case "tool":
      // Images a tool showed go in its tool_result, after the text (Anthropic takes image blocks there).
      if (!m.images?.length)
        return [{ type: "tool_result", tool_use_id: m.toolCallId, content: m.text, is_error: m.isError }];
      return [
        {
          type: "tool_result",
          tool_use_id: m.toolCallId,
          content: [...(m.text ? [{ type: "text" as const, text: m.text }] : []), ...m.images.map(imageBlock)],
          is_error: m.isError,
        },
      ];
  }
};

const isThinking = (b: ContentBlockParam) => b.type === "thinking" || b.type === "redacted_thinking";

/**
 * Anthropic wants user and assistant turns to alternate: tool results and the next user text share
 * a turn. Two assistant messages in a row are one turn, its thinking blocks first.
 */
export const toWire = (messages: LlmMessage[], thinking = false): MessageParam[] => {
  const out: MessageParam[] = [];
  for (const m of messages) {
    const role = m.role === "assistant" ? "assistant" : "user";
    // Anthropic refuses empty text blocks and empty messages (an agent answer of nothing, say).
    const blocks = blocksOf(m, thinking).filter((b) => b.type !== "text" || b.text.trim() !== "");
    if (blocks.length === 0) continue;
    const last = out.at(-1);
    if (last && last.role === role && Array.isArray(last.content)) {
      const merged = [...last.content, ...blocks];
      last.content = [...merged.filter(isThinking), ...merged.filter((b) => !isThinking(b))];
    } else out.push({ role, content: blocks });
  }
  return out;
};

/** What a streamed message's content blocks say: text, calls, thinking (kept whole) and the thinking's text. */
const readContent = (content: Anthropic.Messages.ContentBlock[]) => {
  const texts: string[] = [];
  const toolCalls: ToolCall[] = [];
  const thinkingBlocks: ThinkingBlock[] = [];
  for (const block of content) {
    if (block.type === "text") texts.push(block.text);
    else if (block.type === "tool_use")
      toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
    else if (block.type === "thinking")
      thinkingBlocks.push({ type: "thinking", thinking: block.thinking, signature: block.signature });
    else if (block.type === "redacted_thinking") thinkingBlocks.push({ type: "redacted_thinking", data: block.data });
  }
  const reasoning = thinkingBlocks.flatMap((b) => (b.type === "thinking" && b.thinking ? [b.thinking] : []));
  return {
    text: texts.join("\n"),
    toolCalls,
    thinkingBlocks,
    reasoningContent: reasoning.length ? reasoning.join("\n\n") : null,
  };
};

/**
 * Whether thinking can be on for these messages: Anthropic wants the assistant turn whose tool
 * results end the conversation to start with its thinking, so a turn written without thinking
 * (before it was turned on) is finished without it, as LiteLLM does.
 */
export const thinkingFits = (messages: readonly LlmMessage[]): boolean => {
  let i = messages.length - 1;
  let results = false;
  for (; i >= 0 && messages[i]?.role !== "assistant"; i--) results ||= messages[i]?.role === "tool";
  const last = messages[i];
  return !results || last?.role !== "assistant" || (last.thinkingBlocks?.length ?? 0) > 0;
};

/** A reply cut short: by the output limit, or by the context window filling up as it was written. */
const TRUNCATED = new Set(["max_tokens", "model_context_window_exceeded"]);

/** Anthropic messages through the official SDK, streamed (the SDK refuses long non-streamed requests). */
export const createAnthropicClient = (opts: AnthropicClientOptions): LlmClient => {
  const client = new Anthropic(sdkConstructorOptions(opts));
  return {
    provider: "anthropic",
    model: opts.model,
    async complete(request: LlmRequest, signal?: AbortSignal): Promise<LlmResponse> {
      const thinking = thinkingFits(request.messages) ? thinkingConfig(opts.thinkingBudget, opts.maxTokens) : null;
      try {
        const params: Anthropic.Messages.MessageStreamParams = {
          model: opts.model,
          max_tokens: opts.maxTokens,
          ...withCacheBreakpoints(request.system, toWire(imagesFor(opts.model, request.messages), thinking !== null)),
          ...(thinking ? { thinking } : {}),
          ...(request.tools.length
            ? {
                tools: request.tools.map(
                  (t): Tool => ({
                    name: t.name,
                    description: t.description,
                    input_schema: t.parameters as Tool["input_schema"],
                  }),
                ),
              }
            : {}),
        };
        const message = await client.messages.stream(params, { signal }).finalMessage();
        const stopReason = message.stop_reason ?? null;
        return {
          id: message.id || null,
          ...readContent(message.content),
          truncated: stopReason !== null && TRUNCATED.has(stopReason),
          stopReason,
          model: message.model || opts.model,
          usage: {
            promptTokens: message.usage.input_tokens ?? 0,
            completionTokens: message.usage.output_tokens ?? 0,
            cacheReadTokens: message.usage.cache_read_input_tokens ?? 0,
            cacheWriteTokens: message.usage.cache_creation_input_tokens ?? 0,
          },
        };
      } catch (err) {
        const api =
          err instanceof Anthropic.APIError && !(err instanceof Anthropic.APIUserAbortError)
            ? { status: err.status ?? null, code: undefined, headers: err.headers }
            : null;
        throw llmFailureOf(err, api, opts.userNamedEndpoint ?? false);
      }
    },
  };
};
