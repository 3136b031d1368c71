import { readFileSync } from "node:fs";
import { checkSchema, type JsonPath, type JsonSchema, type SchemaError } from "./json-schema.ts";

/** A refused request, as OpenAI words it (HTTP 400, `invalid_request_error`). */
export interface OpenAiViolation {
  message: string;
  param: string | null;
  code: string | null;
}

/**
 * OpenAI's own request schema for POST /chat/completions, extracted from its OpenAPI document (the
 * source commit is in the file's `$comment`; scripts/extract-openai-schema.mjs made it).
 */
const schema = JSON.parse(
  readFileSync(new URL("./openai-chat-request.schema.json", import.meta.url), "utf8"),
) as JsonSchema;

/** `messages[2].content[0].type`, as OpenAI names a parameter. */
const paramOf = (path: JsonPath): string =>
  path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? p : `.${p}`)).join("");

const typeName = (t: string): string =>
  ({ object: "an object", array: "an array", string: "a string", integer: "an integer", number: "a number" })[t] ??
  (t === "null" ? "null" : `a ${t}`);

const gotName = (v: unknown): string => {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return "an object";
  if (typeof v === "string") return "a string";
  if (typeof v === "boolean") return "a boolean";
  return Number.isInteger(v) ? "an integer" : "a decimal";
};

const quote = (v: unknown) => (typeof v === "string" ? `'${v}'` : JSON.stringify(v));

/** The wording of OpenAI's 400s for a schema error (as its API answers them). */
const schemaViolation = (e: SchemaError): OpenAiViolation => {
  const param = paramOf(e.path);
  switch (e.kind) {
    case "missing":
      return { message: `Missing required parameter: '${param}'.`, param, code: "missing_required_parameter" };
    case "type":
      return {
        message: `Invalid type for '${param}': expected ${e.expected.length > 1 ? "one of " : ""}${e.expected
          .map(typeName)
          .join(" or ")}, but got ${gotName(e.got)} instead.`,
        param,
        code: "invalid_type",
      };
    case "enum":
      return {
        message: `Invalid value: ${quote(e.got)}. Supported values are: ${e.allowed.map(quote).join(", ")}.`,
        param,
        code: "invalid_value",
      };
    case "extra":
      return e.path.length === 1
        ? { message: `Unrecognized request argument supplied: ${param}`, param: null, code: null }
        : { message: `Unknown parameter: '${param}'.`, param, code: "unknown_parameter" };
    case "minItems":
      return e.limit === 1
        ? {
            message: `Invalid '${param}': empty array. Expected an array with minimum length 1, but got an empty array instead.`,
            param,
            code: "empty_array",
          }
        : {
            message: `Invalid '${param}': array too short. Expected an array with minimum length ${e.limit}.`,
            param,
            code: "array_below_min_length",
          };
    case "maxItems":
      return {
        message: `Invalid '${param}': array too long. Expected an array with maximum length ${e.limit}.`,
        param,
        code: "array_above_max_length",
      };
    case "minLength":
    case "maxLength":
      return {
        message: `Invalid '${param}': string too ${e.kind === "minLength" ? "short" : "long"}. Expected a string with ${
          e.kind === "minLength" ? "minimum" : "maximum"
        } length ${e.limit}.`,
        param,
        code: e.kind === "minLength" ? "string_below_min_length" : "string_above_max_length",
      };
    case "minimum":
    case "maximum":
      return {
        message: `Invalid '${param}': ${Number.isInteger(e.got) ? "integer" : "decimal"} ${
          e.kind === "minimum" ? "below minimum" : "above maximum"
        } value. Expected a value ${e.kind === "minimum" ? ">=" : "<="} ${e.limit}, but got ${e.got} instead.`,
        param,
        code: e.kind === "minimum" ? "integer_below_min_value" : "integer_above_max_value",
      };
    case "pattern":
      return {
        message: `Invalid '${param}': string does not match pattern. Expected a string that matches the pattern '${e.pattern}'.`,
        param,
        code: "invalid_value",
      };
  }
};

/**
 * Reasoning models (o1, o3, o4-mini, gpt-5 and their dated or sized variants).
 * https://platform.openai.com/docs/guides/reasoning
 */
const isOpenAiReasoningModel = (model: string): boolean => /^(o1|o3|o4|gpt-5)(\b|[-.]|$)/.test(model);

/**
 * Sampling parameters reasoning models refuse ("Unsupported parameter: 'temperature' is not supported
 * with this model."). Listed as not supported for reasoning models in
 * https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/reasoning#not-supported and
 * https://platform.openai.com/docs/guides/reasoning; `max_tokens` is "not compatible with o-series
 * models" in the OpenAPI document's own description of it (use `max_completion_tokens`).
 */
const REASONING_UNSUPPORTED = [
  "temperature",
  "top_p",
  "presence_penalty",
  "frequency_penalty",
  "logprobs",
  "top_logprobs",
  "logit_bias",
] as const;

const reasoningViolation = (body: Record<string, unknown>): OpenAiViolation | null => {
  const model = String(body.model);
  if (!isOpenAiReasoningModel(model)) {
    // https://platform.openai.com/docs/api-reference/chat/create#chat-create-reasoning_effort:
    // "o-series models only" (others answer "Unsupported parameter").
    if (body.reasoning_effort != null)
      return {
        message: "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
        param: "reasoning_effort",
        code: "unsupported_parameter",
      };
    return null;
  }
  if (body.max_tokens != null)
    return {
      message:
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      param: "max_tokens",
      code: "unsupported_parameter",
    };
  const sampling = REASONING_UNSUPPORTED.find((p) => body[p] != null);
  if (sampling)
    return {
      message: `Unsupported parameter: '${sampling}' is not supported with this model.`,
      param: sampling,
      code: "unsupported_parameter",
    };
  return null;
};

type WireMessage = { role?: string; tool_calls?: { id?: string }[]; tool_call_id?: string };

/**
 * Each assistant message with `tool_calls` is followed at once by one tool message per call, and a tool
 * message answers a call of the assistant message just before that run of tool messages.
 * https://platform.openai.com/docs/guides/function-calling (the results go "right after" the call);
 * OpenAI's wording of both refusals is kept.
 */
const toolOrderViolation = (messages: WireMessage[]): OpenAiViolation | null => {
  let open: { index: number; ids: Set<string> } | null = null;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] ?? {};
    if (m.role === "tool") {
      if (!open?.ids.has(String(m.tool_call_id)))
        return {
          message:
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
          param: `messages.[${i}].role`,
          code: null,
        };
      open.ids.delete(String(m.tool_call_id));
      continue;
    }
    if (open && open.ids.size > 0)
      return {
        message: `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[
          ...open.ids,
        ].join(", ")}`,
        param: `messages.[${open.index}].role`,
        code: null,
      };
    open =
      m.role === "assistant" && m.tool_calls?.length
        ? { index: i, ids: new Set(m.tool_calls.map((c) => String(c.id))) }
        : null;
  }
  if (open && open.ids.size > 0)
    return {
      message: `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[
        ...open.ids,
      ].join(", ")}`,
      param: `messages.[${open.index}].role`,
      code: null,
    };
  return null;
};

/**
 * Function names: "Must be a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length of
 * 64." (the OpenAPI document's description of FunctionObject.name, which its schema does not encode).
 */
const toolNameViolation = (tools: unknown): OpenAiViolation | null => {
  if (!Array.isArray(tools)) return null;
  for (let i = 0; i < tools.length; i++) {
    const name = (tools[i] as { function?: { name?: unknown } })?.function?.name;
    if (typeof name === "string" && !/^[a-zA-Z0-9_-]{1,64}$/.test(name))
      return {
        message: `Invalid 'tools[${i}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`,
        param: `tools[${i}].function.name`,
        code: "invalid_value",
      };
  }
  return null;
};

/** The first rule of OpenAI's that a POST /chat/completions body breaks, or null. */
export const openAiViolation = (body: Record<string, unknown>): OpenAiViolation | null => {
  const e = checkSchema(schema, body, schema, { closed: true });
  if (e) return schemaViolation(e);
  return (
    reasoningViolation(body) ?? toolNameViolation(body.tools) ?? toolOrderViolation(body.messages as WireMessage[])
  );
};
