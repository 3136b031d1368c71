import Anthropic from "@anthropic-ai/sdk";
import type { ContentBlockParam, MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { withCacheBreakpoints } from "./cache-anthropic.ts";
import { llmFailureOf } from "./context-errors.ts";
import {
  type LlmClient,
  type LlmMessage,
  type LlmRequest,
  type LlmResponse,
  type SdkClientOptions,
  sdkConstructorOptions,
  type ToolCall,
} from "./types.ts";

export interface AnthropicClientOptions extends SdkClientOptions {
  maxTokens: number;
}

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
const imageBlock = (url: string): ContentBlockParam => {
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

const blocksOf = (m: LlmMessage): ContentBlockParam[] => {
  switch (m.role) {
    case "user":
      return [{ type: "text", text: m.text }, ...(m.images ?? []).map(imageBlock)];
    case "assistant":
      return [
        ...(m.text ? [{ type: "text" as const, text: m.text }] : []),
        ...m.toolCalls.map((c) => ({
          type: "tool_use" as const,
          id: c.id,
          name: c.name,
          input: parseInput(c.arguments),
        })),
      ];
    case "tool":
      return [{ type: "tool_result", tool_use_id: m.toolCallId, content: m.text, is_error: m.isError }];
  }
};

/** Anthropic wants user and assistant turns to alternate: tool results and the next user text share a turn. */
const toWire = (messages: LlmMessage[]): MessageParam[] => {
  const out: MessageParam[] = [];
  for (const m of messages) {
    const role = m.role === "assistant" ? "assistant" : "user";
    // Anthropic refuses empty text blocks and empty messages (an agent answer of nothing, say).
    const blocks = blocksOf(m).filter((b) => b.type !== "text" || b.text !== "");
    if (blocks.length === 0) continue;
    const last = out.at(-1);
    if (last && last.role === role && Array.isArray(last.content)) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  }
  return out;
};

/** Anthropic messages through the official SDK, streamed (the SDK refuses long non-streamed requests). */
export const createAnthropicClient = (opts: AnthropicClientOptions): LlmClient => {
  const client = new Anthropic(sdkConstructorOptions(opts));
  return {
    provider: "anthropic",
    model: opts.model,
    async complete(request: LlmRequest, signal?: AbortSignal): Promise<LlmResponse> {
      try {
        const stream = client.messages.stream(
          {
            model: opts.model,
            max_tokens: opts.maxTokens,
            ...withCacheBreakpoints(request.system, toWire(request.messages)),
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
          },
          { signal },
        );
        const message = await stream.finalMessage();
        const texts: string[] = [];
        const toolCalls: ToolCall[] = [];
        for (const block of message.content) {
          if (block.type === "text") texts.push(block.text);
          else if (block.type === "tool_use")
            toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
        }
        return {
          id: message.id || null,
          text: texts.join("\n"),
          toolCalls,
          model: message.model || opts.model,
          usage: {
            promptTokens: message.usage.input_tokens ?? 0,
            completionTokens: message.usage.output_tokens ?? 0,
            cacheReadTokens: message.usage.cache_read_input_tokens ?? 0,
            cacheWriteTokens: message.usage.cache_creation_input_tokens ?? 0,
          },
        };
      } catch (err) {
        const api = err instanceof Anthropic.APIError ? { status: err.status ?? null, code: undefined } : null;
        throw llmFailureOf(err, api, opts.userNamedEndpoint ?? false);
      }
    },
  };
};
