import type { ReasoningEffort } from "@tern/core";
import OpenAI from "openai";
import type {
  ChatCompletionContentPart,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from "openai/resources/chat/completions";
import { llmFailureOf } from "./context-errors.ts";
import {
  type LlmClient,
  type LlmMessage,
  type LlmRequest,
  type LlmResponse,
  type SdkClientOptions,
  sdkConstructorOptions,
  type ToolDefinition,
} from "./types.ts";
import { imagesFor } from "./vision.ts";

export interface OpenAiClientOptions extends SdkClientOptions {
  /**
   * The reply's output limit and the parameter that carries it: `max_completion_tokens` for
   * OpenAI's own models (its reasoning models refuse `max_tokens`), `max_tokens` for the
   * OpenAI-compatible servers of others; absent: the server's own default.
   */
  maxOutput?: { tokens: number; param: "max_completion_tokens" | "max_tokens" } | undefined;
  /** `reasoning_effort`, for the models that take it (the model table's `effort`). */
  reasoningEffort?: ReasoningEffort | undefined;
}

const toWire = (m: LlmMessage): ChatCompletionMessageParam => {
  switch (m.role) {
    case "user":
      if (!m.images?.length) return { role: "user", content: m.text };
      return {
        role: "user",
        content: [
          ...(m.text ? [{ type: "text" as const, text: m.text }] : []),
          ...m.images.map((url) => ({ type: "image_url" as const, image_url: { url } })),
        ],
      };
    case "assistant":
      return {
        role: "assistant",
        // null only beside tool calls: an assistant message needs one or the other.
        content: m.text || (m.toolCalls.length ? null : ""),
        ...(m.toolCalls.length
          ? {
              tool_calls: m.toolCalls.map((c) => ({
                id: c.id,
                type: "function" as const,
                function: { name: c.name, arguments: c.arguments },
              })),
            }
          : {}),
      };
    case "tool":
      return { role: "tool", tool_call_id: m.toolCallId, content: m.text };
  }
};

/**
 * The history as OpenAI takes it. A tool message carries text only, so the images tool results
 * showed go in one user message right after the run of tool messages they belong to (which must
 * directly follow the assistant message that made the calls), each named by its call.
 */
const messagesToWire = (messages: LlmMessage[]): ChatCompletionMessageParam[] => {
  const out: ChatCompletionMessageParam[] = [];
  let shown: ChatCompletionContentPart[] = [];
  const flush = () => {
    if (shown.length) out.push({ role: "user", content: shown });
    shown = [];
  };
  for (const m of messages) {
    if (m.role !== "tool") flush();
    out.push(toWire(m));
    if (m.role === "tool" && m.images?.length) {
      shown.push({
        type: "text",
        text: `The image${m.images.length > 1 ? "s" : ""} shown by tool call ${m.toolCallId} (${m.toolName}):`,
      });
      shown.push(...m.images.map((url) => ({ type: "image_url" as const, image_url: { url } })));
    }
  }
  flush();
  return out;
};

const toolToWire = (t: ToolDefinition): ChatCompletionTool => ({
  type: "function",
  function: { name: t.name, description: t.description, parameters: t.parameters },
});

/**
 * OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, LiteLLM, OpenRouter) through the
 * official SDK, streamed so that long answers never hit an idle timeout on the way.
 */
export const createOpenAiClient = (opts: OpenAiClientOptions): LlmClient => {
  const client = new OpenAI(sdkConstructorOptions(opts));
  return {
    provider: "openai",
    model: opts.model,
    async complete(request: LlmRequest, signal?: AbortSignal): Promise<LlmResponse> {
      try {
        const stream = client.chat.completions.stream(
          {
            model: opts.model,
            ...(opts.maxOutput ? { [opts.maxOutput.param]: opts.maxOutput.tokens } : {}),
            ...(opts.reasoningEffort ? { reasoning_effort: opts.reasoningEffort } : {}),
            // The system prompt and the tools first, then the history in order: a prefix that stays the
            // same from step to step (until a condensation), which OpenAI caches by itself.
            messages: [
              { role: "system", content: request.system },
              ...messagesToWire(imagesFor(opts.model, request.messages)),
            ],
            // OpenAI refuses an empty tool list (the condenser's summary call has none).
            ...(request.tools.length ? { tools: request.tools.map(toolToWire) } : {}),
            // Requests of one conversation go to the same cache shard.
            ...(request.cacheKey ? { prompt_cache_key: request.cacheKey } : {}),
            stream_options: { include_usage: true },
          },
          { signal },
        );
        // DeepSeek's reasoner streams its reasoning as `reasoning_content` deltas, which the SDK
        // does not add up: gathered here.
        const reasoning: string[] = [];
        stream.on("chunk", (chunk) => {
          const delta = chunk.choices[0]?.delta as { reasoning_content?: unknown } | undefined;
          if (typeof delta?.reasoning_content === "string") reasoning.push(delta.reasoning_content);
        });
        const completion = await stream.finalChatCompletion();
        const choice = completion.choices[0];
        const message = choice?.message;
        const stopReason = choice?.finish_reason ?? null;
        const toolCalls = (message?.tool_calls ?? []).flatMap((c) =>
          c.type === "function" ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : [],
        );
        return {
          id: completion.id || null,
          text: message?.content ?? "",
          toolCalls,
          truncated: stopReason === "length",
          stopReason,
          reasoningContent: reasoning.join("") || null,
          thinkingBlocks: [],
          model: completion.model || opts.model,
          usage: {
            promptTokens: completion.usage?.prompt_tokens ?? 0,
            completionTokens: completion.usage?.completion_tokens ?? 0,
            cacheReadTokens: completion.usage?.prompt_tokens_details?.cached_tokens ?? 0,
            cacheWriteTokens: 0,
          },
        };
      } catch (err) {
        const api =
          err instanceof OpenAI.APIError && !(err instanceof OpenAI.APIUserAbortError)
            ? { status: err.status ?? null, code: err.code, headers: err.headers }
            : null;
        throw llmFailureOf(err, api, opts.userNamedEndpoint ?? false);
      }
    },
  };
};
