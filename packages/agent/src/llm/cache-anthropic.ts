import type { MessageParam, TextBlockParam } from "@anthropic-ai/sdk/resources/messages";

const ephemeral = { type: "ephemeral" } as const;

/**
 * Anthropic caches a prompt's prefix only up to the blocks marked with `cache_control` (at most
 * four). We mark three, as OpenHands does and one better:
 * - the system prompt: the tools and the system prompt before it are the same at every step;
 * - the last user turn (tool results included): what this request adds is cached for the next;
 * - the user turn before it: the previous request's breakpoint, so the next lookup hits it exactly
 *   even when a step adds more blocks than the 20 Anthropic looks back over.
 * The messages are copied, never changed in place.
 */
export const withCacheBreakpoints = (
  system: string,
  messages: MessageParam[],
): { system: TextBlockParam[]; messages: MessageParam[] } => {
  // A shallow copy of each message and of its block list: the breakpoints go on the copies.
  const marked = messages.map(
    (m) => ({ ...m, content: typeof m.content === "string" ? m.content : [...m.content] }) as MessageParam,
  );
  let userTurns = 0;
  for (let i = marked.length - 1; i >= 0 && userTurns < 2; i--) {
    const m = marked[i];
    if (m?.role !== "user") continue;
    userTurns++;
    if (typeof m.content === "string") {
      m.content = [{ type: "text", text: m.content, cache_control: ephemeral }];
      continue;
    }
    const last = m.content.at(-1);
    // Thinking blocks cannot carry a breakpoint; user turns have none, but be safe.
    if (last && last.type !== "thinking" && last.type !== "redacted_thinking") {
      m.content[m.content.length - 1] = { ...last, cache_control: ephemeral };
    }
  }
  return { system: [{ type: "text", text: system, cache_control: ephemeral }], messages: marked };
};
