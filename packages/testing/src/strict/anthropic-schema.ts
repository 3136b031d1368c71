import type { JsonSchema } from "./json-schema.ts";

/**
 * Anthropic's POST /v1/messages request as JSON Schema, written from the types of its official SDK
 * (github anthropics/anthropic-sdk-typescript, src/resources/messages/messages.ts at commit
 * bfa9197f0182084941052be9752c948638421601: MessageCreateParamsBase, MessageParam, ContentBlockParam
 * and the block params, ToolUnion, ThinkingConfigParam, ToolChoice) and its Messages API reference
 * (https://platform.claude.com/docs/en/api/messages). The blocks and tools a client of ours may send
 * are spelled out field by field; the server tools' result blocks and server tools are checked by
 * their tag and required fields only. Objects are closed: the API answers "Extra inputs are not
 * permitted" to a field it does not know.
 */

const obj = (properties: Record<string, JsonSchema>, required: string[]): JsonSchema => ({
  type: "object",
  properties,
  required,
  additionalProperties: false,
});
const tag = (name: string): JsonSchema => ({ type: "string", enum: [name] });
const ref = (name: string): JsonSchema => ({ $ref: `#/$defs/${name}` });
const nullable = (s: JsonSchema): JsonSchema => ({ anyOf: [s, { type: "null" }] });
const str: JsonSchema = { type: "string" };
const cacheControl = nullable(ref("CacheControlEphemeral"));
/** An object only its tag and `required` are checked of (a server tool's own blocks). */
const tagged = (name: string, required: string[] = []): JsonSchema => ({
  type: "object",
  properties: { type: tag(name) },
  required: ["type", ...required],
});

const defs: Record<string, JsonSchema> = {
  CacheControlEphemeral: obj({ type: tag("ephemeral"), ttl: { type: "string", enum: ["5m", "1h"] } }, ["type"]),
  CitationsConfigParam: obj({ enabled: { type: "boolean" } }, []),
  TextBlockParam: obj(
    {
      text: str,
      type: tag("text"),
      cache_control: cacheControl,
      citations: nullable({ type: "array", items: { type: "object" } }),
    },
    ["text", "type"],
  ),
  ImageBlockParam: obj(
    {
      source: {
        oneOf: [
          obj(
            {
              data: str,
              media_type: { type: "string", enum: ["image/jpeg", "image/png", "image/gif", "image/webp"] },
              type: tag("base64"),
            },
            ["data", "media_type", "type"],
          ),
          obj({ type: tag("url"), url: str }, ["type", "url"]),
          obj({ file_id: str, type: tag("file") }, ["file_id", "type"]),
        ],
        discriminator: { propertyName: "type" },
      },
      type: tag("image"),
      cache_control: cacheControl,
      transformations: nullable(obj({ oversized_image: { type: "string", enum: ["downsize", "error"] } }, [])),
    },
    ["source", "type"],
  ),
  DocumentBlockParam: obj(
    {
      source: {
        oneOf: [
          obj({ data: str, media_type: tag("application/pdf"), type: tag("base64") }, ["data", "media_type", "type"]),
          obj({ data: str, media_type: tag("text/plain"), type: tag("text") }, ["data", "media_type", "type"]),
          obj(
            {
              content: {
                anyOf: [str, { type: "array", items: { anyOf: [ref("TextBlockParam"), ref("ImageBlockParam")] } }],
              },
              type: tag("content"),
            },
            ["content", "type"],
          ),
          obj({ type: tag("url"), url: str }, ["type", "url"]),
          obj({ file_id: str, type: tag("file") }, ["file_id", "type"]),
        ],
        discriminator: { propertyName: "type" },
      },
      type: tag("document"),
      cache_control: cacheControl,
      citations: nullable(ref("CitationsConfigParam")),
      context: nullable(str),
      title: nullable(str),
    },
    ["source", "type"],
  ),
  SearchResultBlockParam: obj(
    {
      content: { type: "array", items: ref("TextBlockParam") },
      source: str,
      title: str,
      type: tag("search_result"),
      cache_control: cacheControl,
      citations: ref("CitationsConfigParam"),
    },
    ["content", "source", "title", "type"],
  ),
  ThinkingBlockParam: obj({ signature: str, thinking: str, type: tag("thinking") }, ["signature", "thinking", "type"]),
  RedactedThinkingBlockParam: obj({ data: str, type: tag("redacted_thinking") }, ["data", "type"]),
  ToolUseBlockParam: obj(
    {
      // The API refuses other ids ("String should match pattern '^[a-zA-Z0-9_-]+$'"): the ids it makes
      // are of that form (https://platform.claude.com/docs/en/api/messages).
      id: { type: "string", pattern: "^[a-zA-Z0-9_-]+$" },
      input: { type: "object" },
      name: { type: "string", minLength: 1 },
      type: tag("tool_use"),
      cache_control: cacheControl,
      caller: { type: "object" },
      toolset_name: nullable(str),
    },
    ["id", "input", "name", "type"],
  ),
  ToolResultBlockParam: obj(
    {
      tool_use_id: { type: "string", pattern: "^[a-zA-Z0-9_-]+$" },
      type: tag("tool_result"),
      cache_control: cacheControl,
      content: {
        anyOf: [
          str,
          {
            type: "array",
            items: {
              oneOf: [
                ref("TextBlockParam"),
                ref("ImageBlockParam"),
                ref("SearchResultBlockParam"),
                ref("DocumentBlockParam"),
                obj({ tool_name: str, type: tag("tool_reference"), cache_control: cacheControl }, [
                  "tool_name",
                  "type",
                ]),
                tagged("browser_state"),
              ],
              discriminator: { propertyName: "type" },
            },
          },
        ],
      },
      is_error: { type: "boolean" },
      toolset_name: nullable(str),
    },
    ["tool_use_id", "type"],
  ),
  ContentBlockParam: {
    oneOf: [
      ref("TextBlockParam"),
      ref("ImageBlockParam"),
      ref("DocumentBlockParam"),
      ref("SearchResultBlockParam"),
      ref("ThinkingBlockParam"),
      ref("RedactedThinkingBlockParam"),
      ref("ToolUseBlockParam"),
      ref("ToolResultBlockParam"),
      tagged("server_tool_use", ["id", "input", "name"]),
      tagged("web_search_tool_result", ["content", "tool_use_id"]),
      tagged("web_fetch_tool_result", ["content", "tool_use_id"]),
      tagged("code_execution_tool_result", ["content", "tool_use_id"]),
      tagged("bash_code_execution_tool_result", ["content", "tool_use_id"]),
      tagged("text_editor_code_execution_tool_result", ["content", "tool_use_id"]),
      tagged("tool_search_tool_result", ["content", "tool_use_id"]),
      tagged("container_upload", ["file_id"]),
    ],
    discriminator: { propertyName: "type" },
  },
  MessageParam: obj(
    {
      content: { anyOf: [str, { type: "array", items: ref("ContentBlockParam") }] },
      role: { type: "string", enum: ["user", "assistant", "system"] },
    },
    ["content", "role"],
  ),
  /** A tool of the client's own (`type` absent, "custom" or null). */
  Tool: obj(
    {
      input_schema: {
        type: "object",
        properties: { type: tag("object"), properties: {}, required: nullable({ type: "array", items: str }) },
        required: ["type"],
      },
      // "Must match the regex ^[a-zA-Z0-9_-]{1,64}$"
      // (https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use).
      name: { type: "string", pattern: "^[a-zA-Z0-9_-]{1,64}$" },
      allowed_callers: { type: "array", items: str },
      cache_control: cacheControl,
      defer_loading: { type: "boolean" },
      description: str,
      eager_input_streaming: nullable({ type: "boolean" }),
      input_examples: { type: "array", items: { type: "object" } },
      strict: { type: "boolean" },
      type: nullable(tag("custom")),
    },
    ["input_schema", "name"],
  ),
  /** Anthropic's own versioned tools (bash_20250124, web_search_20250305, …): tag and name only. */
  ServerTool: {
    type: "object",
    properties: { type: { type: "string", pattern: "^(?!custom$)[a-z_]+_\\d{8}$" }, name: str },
    required: ["type", "name"],
  },
  ThinkingConfigParam: {
    oneOf: [
      obj(
        {
          // ThinkingConfigEnabled.budget_tokens: "Must be ≥1024 and less than `max_tokens`."
          budget_tokens: { type: "integer", minimum: 1024 },
          type: tag("enabled"),
          display: nullable({ type: "string", enum: ["summarized", "omitted"] }),
        },
        ["budget_tokens", "type"],
      ),
      obj({ type: tag("disabled") }, ["type"]),
      obj({ type: tag("adaptive"), display: nullable({ type: "string", enum: ["summarized", "omitted"] }) }, ["type"]),
    ],
    discriminator: { propertyName: "type" },
  },
  ToolChoice: {
    oneOf: [
      obj({ type: tag("auto"), disable_parallel_tool_use: { type: "boolean" } }, ["type"]),
      obj({ type: tag("any"), disable_parallel_tool_use: { type: "boolean" } }, ["type"]),
      obj({ name: str, type: tag("tool"), disable_parallel_tool_use: { type: "boolean" } }, ["name", "type"]),
      obj({ type: tag("none") }, ["type"]),
    ],
    discriminator: { propertyName: "type" },
  },
};

export const anthropicRequestSchema: JsonSchema = {
  $defs: defs,
  ...obj(
    {
      max_tokens: { type: "integer", minimum: 0 },
      messages: { type: "array", items: ref("MessageParam") },
      model: { type: "string", minLength: 1 },
      cache_control: cacheControl,
      container: nullable({ anyOf: [str, { type: "object" }] }),
      inference_geo: nullable(str),
      metadata: obj({ user_id: nullable({ type: "string", maxLength: 256 }) }, []),
      output_config: obj(
        {
          effort: nullable({ type: "string", enum: ["low", "medium", "high", "xhigh", "max"] }),
          format: nullable({ type: "object" }),
        },
        [],
      ),
      service_tier: { type: "string", enum: ["auto", "standard_only"] },
      stop_sequences: { type: "array", items: str },
      stream: { type: "boolean" },
      system: { anyOf: [str, { type: "array", items: ref("TextBlockParam") }] },
      temperature: { type: "number", minimum: 0, maximum: 1 },
      thinking: ref("ThinkingConfigParam"),
      tool_choice: ref("ToolChoice"),
      tools: {
        type: "array",
        items: {
          anyOf: [ref("Tool"), ref("ServerTool")],
        },
      },
      top_k: { type: "integer", minimum: 0 },
      top_p: { type: "number", minimum: 0, maximum: 1 },
      user_profile_id: str,
    },
    ["max_tokens", "messages", "model"],
  ),
};
