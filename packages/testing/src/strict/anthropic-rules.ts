import { anthropicRequestSchema } from "./anthropic-schema.ts";
import { checkSchema, type JsonPath, type SchemaError } from "./json-schema.ts";

/** What the server sent in its replies' thinking blocks, to refuse any change on the way back. */
export interface ThinkingMemory {
  /** signature → the thinking text sent with it, the reply it came in and its place there. */
  thinking: Map<string, { text: string; reply: string; position: number }>;
  /** redacted_thinking data → the reply it came in and its place there. */
  redacted: Map<string, { reply: string; position: number }>;
}

export const newThinkingMemory = (): ThinkingMemory => ({ thinking: new Map(), redacted: new Map() });

type Block = { type?: string; text?: string; cache_control?: unknown; content?: unknown; [k: string]: unknown };
type Message = { role?: string; content?: string | Block[] };

const pathText = (path: JsonPath) => path.join(".");
const quote = (v: unknown) => (typeof v === "string" ? `'${v}'` : JSON.stringify(v));

const typeWord = (t: string) =>
  ({ object: "a valid dictionary", array: "a valid list", string: "a valid string", integer: "a valid integer" })[t] ??
  `a valid ${t}`;

/** Anthropic's (pydantic's) wording of a schema error: `messages.1.content.0.text: Field required`. */
const schemaMessage = (e: SchemaError): string => {
  const at = pathText(e.path);
  switch (e.kind) {
    case "missing":
      return `${at}: Field required`;
    case "type":
      return `${at}: Input should be ${e.expected.map(typeWord).join(" or ")}`;
    case "enum":
      return e.tag
        ? `${pathText(e.path.slice(0, -1))}: Input tag ${quote(e.got)} found using '${e.tag}' does not match any of the expected tags: ${e.allowed
            .map(quote)
            .join(", ")}`
        : `${at}: Input should be ${e.allowed.map(quote).join(" or ")}`;
    case "extra":
      return `${at}: Extra inputs are not permitted`;
    case "minimum":
      return `${at}: Input should be greater than or equal to ${e.limit}`;
    case "maximum":
      return `${at}: Input should be less than or equal to ${e.limit}`;
    case "minLength":
      return `${at}: String should have at least ${e.limit} character${e.limit === 1 ? "" : "s"}`;
    case "maxLength":
      return `${at}: String should have at most ${e.limit} characters`;
    case "minItems":
      return `${at}: List should have at least ${e.limit} item${e.limit === 1 ? "" : "s"}`;
    case "maxItems":
      return `${at}: List should have at most ${e.limit} items`;
    case "pattern":
      return `${at}: String should match pattern '${e.pattern}'`;
  }
};

const blocksOf = (m: Message | undefined): Block[] => (Array.isArray(m?.content) ? m.content : []);

/**
 * Thinking's own limits: `budget_tokens` below `max_tokens` (ThinkingConfigEnabled in the SDK: "Must be
 * ≥1024 and less than `max_tokens`"), and no `temperature` other than 1, no `top_k`, no forced tool
 * (https://platform.claude.com/docs/en/build-with-claude/extended-thinking#feature-compatibility).
 */
const thinkingConfigViolation = (body: Record<string, unknown>): string | null => {
  const thinking = body.thinking as { type?: string; budget_tokens?: number } | undefined;
  if (thinking?.type !== "enabled" && thinking?.type !== "adaptive") return null;
  if (thinking.type === "enabled" && (thinking.budget_tokens ?? 0) >= Number(body.max_tokens))
    return "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size";
  if (body.temperature !== undefined && body.temperature !== 1)
    return "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility";
  if (body.top_k !== undefined)
    return "`top_k` must be unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility";
  const choice = (body.tool_choice as { type?: string } | undefined)?.type;
  if (choice === "any" || choice === "tool") return "Thinking may not be enabled when tool_choice forces tool use.";
  return null;
};

/**
 * At most four cache breakpoints in a request, counted over the tools, the system prompt and every
 * message block (https://platform.claude.com/docs/en/build-with-claude/prompt-caching: "You can define
 * up to 4 cache breakpoints").
 */
const cacheBreakpointViolation = (body: Record<string, unknown>): string | null => {
  let found = 0;
  const count = (blocks: unknown) => {
    if (!Array.isArray(blocks)) return;
    for (const b of blocks as Block[]) {
      if (b?.cache_control) found++;
      count(b?.content);
    }
  };
  count(body.tools);
  count(body.system);
  for (const m of (body.messages ?? []) as Message[]) count(m.content);
  return found > 4 ? `A maximum of 4 blocks with cache_control may be provided. Found ${found}.` : null;
};

/**
 * No empty text block, and no message without content but the final assistant one (the API refuses
 * both: "text content blocks must be non-empty", "all messages must have non-empty content except for
 * the optional final assistant message"; https://platform.claude.com/docs/en/api/messages).
 */
const emptyContentViolation = (body: Record<string, unknown>): string | null => {
  const messages = body.messages as Message[];
  if (Array.isArray(body.system) && (body.system as Block[]).some((b) => !b.text?.trim()))
    return "system: text content blocks must contain non-whitespace text";
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as Message;
    const last = i === messages.length - 1 && m.role === "assistant";
    const content = m.content;
    if ((typeof content === "string" ? content.trim() === "" : content?.length === 0) && !last)
      return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`;
    for (const b of blocksOf(m)) {
      if (b.type === "text" && !b.text?.trim()) return "messages: text content blocks must contain non-whitespace text";
    }
  }
  return null;
};

/**
 * Each `tool_use` is answered by a `tool_result` in the very next message (a user one), those results
 * come first in it, and each `tool_result` answers a `tool_use` of the message just before
 * (https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use: "Tool result
 * blocks must immediately follow their corresponding tool use blocks in the message history"; "In the
 * user message containing tool results, the tool_result blocks must come FIRST in the content array").
 * The wording is the API's.
 */
const toolResultViolation = (messages: Message[]): string | null => {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    const before = messages[i - 1];
    const asked = new Set(
      before?.role === "assistant"
        ? blocksOf(before)
            .filter((b) => b.type === "tool_use")
            .map((b) => String(b.id))
        : [],
    );
    let seenOther = false;
    const blocks = blocksOf(m);
    for (let j = 0; j < blocks.length; j++) {
      const b = blocks[j]!;
      if (b.type !== "tool_result") {
        seenOther = true;
        continue;
      }
      const id = String(b.tool_use_id);
      if (m.role !== "user" || !asked.has(id))
        return `messages.${i}.content.${j}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
      if (seenOther)
        return `messages.${i}.content.${j}: \`tool_result\` blocks must come first in the user message's content, before any other block: text goes after all tool results.`;
      asked.delete(id);
    }
    if (m.role !== "assistant") continue;
    const next = messages[i + 1];
    const answered = new Set(
      next?.role === "user"
        ? blocksOf(next)
            .filter((b) => b.type === "tool_result")
            .map((b) => String(b.tool_use_id))
        : [],
    );
    const missing = blocksOf(m)
      .filter((b) => b.type === "tool_use" && !answered.has(String(b.id)))
      .map((b) => String(b.id));
    if (missing.length)
      return `messages.${i + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
  }
  return null;
};

/**
 * Thinking blocks come back as they were sent: each signature one the server gave, with the very text
 * it gave with it, each redacted block's data one it gave, in their original order (ThinkingBlockParam
 * in the SDK: "Thinking blocks must be passed back unmodified and in their original order; a modified
 * block results in a 400"). With thinking on, the assistant turn that the last tool results answer
 * starts with its thinking (https://platform.claude.com/docs/en/build-with-claude/extended-thinking#preserving-thinking-blocks).
 */
const thinkingBlocksViolation = (body: Record<string, unknown>, memory: ThinkingMemory): string | null => {
  const messages = body.messages as Message[];
  for (let i = 0; i < messages.length; i++) {
    let previous: { reply: string; position: number } | null = null;
    const blocks = blocksOf(messages[i]);
    for (let j = 0; j < blocks.length; j++) {
      const b = blocks[j]!;
      if (b.type !== "thinking" && b.type !== "redacted_thinking") continue;
      const sent =
        b.type === "thinking" ? memory.thinking.get(String(b.signature)) : memory.redacted.get(String(b.data));
      if (!sent || (b.type === "thinking" && "text" in sent && sent.text !== b.thinking))
        return b.type === "thinking"
          ? `messages.${i}.content.${j}: Invalid \`signature\` in \`thinking\` block`
          : `messages.${i}.content.${j}: Invalid \`data\` in \`redacted_thinking\` block`;
      if (previous && previous.reply === sent.reply && previous.position >= sent.position)
        return `messages.${i}.content.${j}: \`thinking\` blocks must be passed back in their original order`;
      previous = sent;
    }
  }
  const thinking = (body.thinking as { type?: string } | undefined)?.type;
  if (thinking !== "enabled" && thinking !== "adaptive") return null;
  const last = messages.at(-1);
  const assistant = messages.at(-2);
  if (last?.role !== "user" || assistant?.role !== "assistant") return null;
  if (!blocksOf(last).some((b) => b.type === "tool_result")) return null;
  const first = blocksOf(assistant)[0];
  if (first && first.type !== "thinking" && first.type !== "redacted_thinking")
    return `messages.${messages.length - 2}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first.type}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceeding the lastmost set of \`tool_use\` and \`tool_result\` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable \`thinking\`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking`;
  return null;
};

/** The first rule of Anthropic's that a POST /v1/messages body breaks (its error message), or null. */
export const anthropicViolation = (body: Record<string, unknown>, memory: ThinkingMemory): string | null => {
  const e = checkSchema(anthropicRequestSchema, body, anthropicRequestSchema);
  if (e) return schemaMessage(e);
  const messages = body.messages as Message[];
  return (
    thinkingConfigViolation(body) ??
    cacheBreakpointViolation(body) ??
    emptyContentViolation(body) ??
    toolResultViolation(messages) ??
    thinkingBlocksViolation(body, memory)
  );
};
