import { z } from "zod";
import type { ExecutionStatus } from "./domain.ts";
import { datetimeSchema } from "./schemas/formats.ts";
import { type MessageContent, messageContentSchema, textContentSchema } from "./schemas/start-request.ts";

/**
 * Conversation events (DESIGN, Events): one zod discriminated union keyed by `kind`, in the JSON
 * shape clients see (`{ id, kind, source, timestamp, ...payload }`). Everything else is derived
 * from it: the kind list, each kind's stored payload (the same fields, without the four head
 * fields), the typed drafts writers append and the typed events readers get back. Field names
 * are OpenHands' and are stored as they are, so rows written before this module still parse.
 */

export const eventSources = ["agent", "user", "environment"] as const;
export type EventSource = (typeof eventSources)[number];

/** A tool call as the model wrote it, kept so the history can be given back to it verbatim. */
const toolCallSchema = z.object({
  id: z.string(),
  name: z.string(),
  arguments: z.string().meta({ description: "JSON text as the model wrote it, possibly malformed" }),
});
export type ToolCall = z.infer<typeof toolCallSchema>;

const toolName = z.string().meta({ description: "The tool the model called (terminal, file_editor, think, finish)" });
const toolCallId = z.string().meta({ description: "The id of the call, as in the model's tool_call" });
const thought = z
  .array(textContentSchema)
  .meta({ description: "The assistant's text that came with the call (first call of a response only)" });
const llmResponseId = z.string().meta({ description: "Calls of one LLM response share it" });
/** OpenHands' ThinkingBlock and RedactedThinkingBlock: Anthropic's, kept as given to go back unchanged. */
const thinkingBlocks = z
  .array(
    z.union([
      z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string().nullable().optional() }),
      z.object({ type: z.literal("redacted_thinking"), data: z.string() }),
    ]),
  )
  .meta({ description: "Anthropic's thinking blocks of the response, with their signatures" });
const reasoningContent = z
  .string()
  .nullable()
  .meta({ description: "The model's reasoning as text, when it shows it (first call of a response only)" });
const historySeq = z
  .number()
  .int()
  .nonnegative()
  .meta({ description: "The last event sequence number the model had seen when it answered" });

/**
 * How risky the model judged a tool call (OpenHands' SecurityRisk). UNKNOWN: the model gave none,
 * or one that is not a level; the confirmation policy treats it as its `confirm_unknown` says.
 */
export const securityRisks = ["UNKNOWN", "LOW", "MEDIUM", "HIGH"] as const;
export type SecurityRisk = (typeof securityRisks)[number];
export const securityRiskSchema = z
  .enum(securityRisks)
  .meta({ id: "SecurityRisk", description: "The risk the model gave the call (UNKNOWN: none, or not a level)" });

/** The fields every event has, besides its payload. */
const head = <K extends string>(kind: K) => ({
  id: z.string().meta({ format: "uuid" }),
  kind: z.literal(kind),
  source: z.enum(eventSources),
  timestamp: datetimeSchema,
});

export const eventSchema = z
  .discriminatedUnion("kind", [
    z
      .object({
        ...head("MessageEvent"),
        llm_message: z.object({
          role: z.enum(["user", "assistant"]),
          content: z.array(messageContentSchema),
          // The agent's answer: its reasoning, as OpenHands' Message carries it.
          reasoning_content: reasoningContent.optional(),
          thinking_blocks: thinkingBlocks.optional(),
        }),
        /** A user message: the triggered skills added to it for the model. */
        activated_skills: z.array(z.string()).optional(),
        /** The agent's answer: the response it came from. */
        llm_response_id: llmResponseId.optional(),
        history_seq: historySeq.optional(),
      })
      .meta({ id: "MessageEvent", description: "A message from the user or an answer from the agent" }),
    z
      .object({
        ...head("ActionEvent"),
        tool_name: toolName,
        tool_call_id: toolCallId,
        thought,
        reasoning_content: reasoningContent.optional(),
        thinking_blocks: thinkingBlocks.optional(),
        action: z
          .looseObject({ kind: z.string().meta({ description: "e.g. TerminalAction" }) })
          .meta({ description: "The validated arguments of the call" }),
        tool_call: toolCallSchema,
        llm_response_id: llmResponseId,
        history_seq: historySeq,
        // Optional only so rows written before confirmation mode still parse; every new call has both.
        security_risk: securityRiskSchema.optional(),
        summary: z.string().optional().meta({ description: "What the call does, in a few words, by the model" }),
      })
      .meta({ id: "ActionEvent", description: "A tool call of the agent, validated and about to run" }),
    z
      .object({
        ...head("ObservationEvent"),
        tool_name: toolName,
        tool_call_id: toolCallId,
        action_id: z.string().meta({ format: "uuid", description: "The ActionEvent this is the result of" }),
        observation: z
          .looseObject({
            kind: z.string().meta({ description: "e.g. TerminalObservation" }),
            // Text, and images for a model that accepts them (file_editor viewing an image, MCP tools).
            content: z.array(messageContentSchema),
            is_error: z.boolean().optional(),
          })
          .meta({ description: "The tool's result; the other fields depend on the tool" }),
      })
      .meta({ id: "ObservationEvent", description: "The result of an ActionEvent" }),
    z
      .object({
        ...head("UserRejectObservation"),
        tool_name: toolName,
        tool_call_id: toolCallId,
        action_id: z.string().meta({ format: "uuid", description: "The ActionEvent the user rejected" }),
        rejection_reason: z.string(),
        rejection_source: z.enum(["user"]).optional(),
      })
      .meta({
        id: "UserRejectObservation",
        description:
          "The user rejected a pending ActionEvent (confirmation mode); the model reads the reason as its result",
      }),
    z
      .object({
        ...head("AgentErrorEvent"),
        error: z.string(),
        // The rest only on a tool call the model got wrong (unknown tool, bad JSON, bad
        // arguments): the model reads `error` as that call's result.
        tool_name: toolName.optional(),
        tool_call_id: toolCallId.optional(),
        tool_call: toolCallSchema.optional(),
        llm_response_id: llmResponseId.optional(),
        history_seq: historySeq.optional(),
        thought: thought.optional(),
        reasoning_content: reasoningContent.optional(),
        thinking_blocks: thinkingBlocks.optional(),
      })
      .meta({ id: "AgentErrorEvent", description: "A run that failed, or a tool call the model got wrong" }),
    z
      .object({
        ...head("SystemPromptEvent"),
        system_prompt: textContentSchema,
        tools: z
          .array(
            z.object({
              type: z.literal("function"),
              function: z.object({
                name: z.string(),
                description: z.string(),
                parameters: z.record(z.string(), z.unknown()).meta({ description: "JSON Schema of the arguments" }),
              }),
            }),
          )
          .meta({ description: "The tools offered to the model" }),
      })
      .meta({ id: "SystemPromptEvent", description: "The agent's system prompt and tools" }),
    z
      .object({
        ...head("ConversationStateUpdateEvent"),
        key: z.string().meta({ description: "e.g. execution_status" }),
        value: z.unknown(),
      })
      .meta({ id: "ConversationStateUpdateEvent", description: "A change of the conversation's state" }),
    z.object(head("PauseEvent")).meta({ id: "PauseEvent", description: "The user asked the agent to pause" }),
    z
      .object({
        ...head("CondensationEvent"),
        forgotten_event_ids: z
          .array(z.string().meta({ format: "uuid" }))
          .meta({ description: "The events left out of the history the model is sent from now on" }),
        summary: z.string().nullable().meta({ description: "What the forgotten events held, written by the LLM" }),
        summary_offset: z
          .number()
          .int()
          .nonnegative()
          .nullable()
          .meta({ description: "Where the summary stands in the history the model is sent (0: first)" }),
        llm_response_id: llmResponseId.optional(),
        /** Ours: the first event of the kept tail; every later event is in the model's history. */
        kept_from_seq: z.number().int().nonnegative().optional(),
        /** Ours: what asked for it (`events`, `tokens`, `context_error`). */
        reason: z.string().optional(),
      })
      .meta({
        id: "CondensationEvent",
        description: "Part of the history was replaced by a summary in what the model is sent",
      }),
    z.object(head("InterruptEvent")).meta({
      id: "InterruptEvent",
      description:
        "The user stopped the agent now (POST /interrupt): the LLM call in flight was cancelled and the running " +
        "command got Ctrl-C; a PauseEvent follows",
    }),
    z
      .object({
        ...head("ConversationErrorEvent"),
        code: z.string().meta({ description: "What ended the run, e.g. MaxIterationsReached" }),
        detail: z.string(),
        classification: z
          .object({
            kind: z.enum(["auth", "quota", "rate_limit", "config", "transient", "agent_action", "internal", "unknown"]),
            retryable: z.boolean(),
            user_action: z.enum(["none", "retry", "settings"]),
            error_id: z.string().nullable(),
          })
          .nullable()
          .optional()
          .meta({ description: "OpenHands' safe error semantics for API consumers (its classify_error of the code)" }),
      })
      .meta({
        id: "ConversationErrorEvent",
        description:
          "The run ended in error for a reason of the conversation's, not the model's (OpenHands' event of that " +
          "name): never sent to the model",
      }),
  ])
  .meta({ id: "Event" });

/** An event as clients see it. */
export type EventJson = z.infer<typeof eventSchema>;
export type EventKind = EventJson["kind"];
export const eventKinds: readonly EventKind[] = eventSchema.options.map((o) => o.shape.kind.value);

type HeadKey = keyof ReturnType<typeof head>;
const headKeys = { id: true, kind: true, source: true, timestamp: true } as const satisfies Record<HeadKey, true>;

/** The payload stored for a kind: its fields without the head (`id`, `kind`, `source`, `timestamp`). */
export type EventPayload<K extends EventKind> = Omit<Extract<EventJson, { kind: K }>, HeadKey>;

/**
 * What a writer appends; the store gives it an id (unless given), a sequence number and a
 * timestamp. Given several kinds, a union with one member per kind (`kind` narrows `payload`).
 */
export type EventDraftOf<K extends EventKind> = {
  [P in K]: {
    kind: P;
    source: EventSource;
    payload: EventPayload<P>;
    /** Callers that must not write an event twice pass a stable id. */
    id?: string;
  };
}[K];
export type EventDraft = EventDraftOf<EventKind>;

/** An event read back from the store; as with drafts, `kind` narrows `payload`. */
export type StoredEvent = {
  [K in EventKind]: {
    id: string;
    conversationId: string;
    seq: number;
    kind: K;
    source: EventSource;
    /** ISO 8601 UTC with microseconds, ending in Z. */
    timestamp: string;
    payload: EventPayload<K>;
  };
}[EventKind];
/** What the agent reads at one step (the events repository's readForAgent). */
export interface AgentHistoryRead {
  /** The system prompt and the first user message, when they come before `recent`. */
  head: StoredEvent[];
  /** The events from the latest condensation's kept tail on (all of them before any condensation), in order. */
  recent: StoredEvent[];
}

/** What a run's checks need of its whole length, counted in the database (runProgress). */
export interface RunProgress {
  /** LLM responses of the agent since the run began. */
  iterations: number;
  /** A PauseEvent arrived since the run began. */
  pauseRequested: boolean;
}

/** The stored events of the given kinds (an Extract, so a filter over any StoredEvent[] may narrow to it). */
export type StoredEventOf<K extends EventKind> = Extract<StoredEvent, { kind: K }>;

export type ActionPayload = EventPayload<"ActionEvent">;
export type ObservationPayload = EventPayload<"ObservationEvent">;
export type Observation = ObservationPayload["observation"];
export type SystemPromptTool = EventPayload<"SystemPromptEvent">["tools"][number];
/** An AgentErrorEvent about one tool call: every tool field present. */
export type ToolCallErrorPayload = Required<
  Omit<EventPayload<"AgentErrorEvent">, "thought" | "reasoning_content" | "thinking_blocks">
> &
  Pick<EventPayload<"AgentErrorEvent">, "thought" | "reasoning_content" | "thinking_blocks">;

/** What the model had answered, on the events an LLM response wrote. */
export interface AgentTurn {
  llm_response_id: string;
  history_seq: number;
}

/** A response's reasoning, as the agent's events carry it (OpenHands' field names). */
export interface AgentReasoning {
  reasoning_content?: string | null;
  thinking_blocks?: z.infer<typeof thinkingBlocks>;
}

const draft = <K extends EventKind>(kind: K, source: EventSource, payload: EventPayload<K>): EventDraftOf<K> => ({
  kind,
  source,
  payload,
});

/** Constructors, one per kind (two for messages and agent errors): every writer appends these. */
export const newEvent = {
  userMessage: (content: MessageContent[], activatedSkills?: string[]) =>
    draft("MessageEvent", "user", {
      llm_message: { role: "user", content },
      ...(activatedSkills ? { activated_skills: activatedSkills } : {}),
    }),
  agentMessage: (text: string, turn: AgentTurn, reasoning: AgentReasoning = {}) =>
    draft("MessageEvent", "agent", {
      llm_message: {
        role: "assistant",
        content: [{ type: "text", text }],
        ...(reasoning.reasoning_content ? { reasoning_content: reasoning.reasoning_content } : {}),
        ...(reasoning.thinking_blocks?.length ? { thinking_blocks: reasoning.thinking_blocks } : {}),
      },
      ...turn,
    }),
  action: (payload: ActionPayload) => draft("ActionEvent", "agent", payload),
  observation: (payload: ObservationPayload) => draft("ObservationEvent", "environment", payload),
  agentError: (error: string) => draft("AgentErrorEvent", "agent", { error }),
  toolCallError: (payload: ToolCallErrorPayload) => draft("AgentErrorEvent", "agent", payload),
  systemPrompt: (text: string, tools: SystemPromptTool[]) =>
    draft("SystemPromptEvent", "agent", { system_prompt: { type: "text", text }, tools }),
  stateUpdate: (key: string, value: unknown) => draft("ConversationStateUpdateEvent", "environment", { key, value }),
  executionStatus: (status: ExecutionStatus) =>
    draft("ConversationStateUpdateEvent", "environment", { key: "execution_status", value: status }),
  pause: () => draft("PauseEvent", "user", {}),
  condensation: (payload: EventPayload<"CondensationEvent">) => draft("CondensationEvent", "environment", payload),
  interrupt: () => draft("InterruptEvent", "user", {}),
  /** OpenHands' classify_error for the codes tern ends a run with; any other is "unknown". */
  conversationError: (code: string, detail: string) =>
    draft("ConversationErrorEvent", "environment", {
      code,
      detail,
      classification: {
        kind: code === "MaxIterationsReached" ? "agent_action" : "unknown",
        retryable: false,
        user_action: "none",
        error_id: null,
      },
    }),
  userReject: (action: { id: string; tool_name: string; tool_call_id: string }, reason: string) =>
    draft("UserRejectObservation", "user", {
      tool_name: action.tool_name,
      tool_call_id: action.tool_call_id,
      action_id: action.id,
      rejection_reason: reason,
      rejection_source: "user",
    }),
};

/** A tool call the model got wrong, with what the history needs to give it back as that call's result. */
export const isToolCallError = (
  e: StoredEvent,
): e is StoredEventOf<"AgentErrorEvent"> & { payload: ToolCallErrorPayload } =>
  e.kind === "AgentErrorEvent" &&
  e.payload.tool_name !== undefined &&
  e.payload.tool_call_id !== undefined &&
  e.payload.tool_call !== undefined &&
  e.payload.llm_response_id !== undefined &&
  e.payload.history_seq !== undefined;

/** A stored row that does not match its kind's schema: a bug or a bad migration, never a user's fault. */
export class InvalidEventError extends Error {
  readonly eventId: string;
  constructor(eventId: string, message: string) {
    super(message);
    this.name = "InvalidEventError";
    this.eventId = eventId;
  }
}

const members: readonly z.ZodObject<{ kind: z.ZodLiteral<EventKind> } & Record<HeadKey, z.ZodType>>[] =
  eventSchema.options;
const payloadSchemas = new Map<string, z.ZodType>(members.map((o) => [o.shape.kind.value, o.omit(headKeys)]));
const isEventSource = (s: string): s is EventSource => (eventSources as readonly string[]).includes(s);

/** An events row as the database returns it. */
export interface EventRow {
  id: string;
  conversationId: string;
  seq: number;
  kind: string;
  source: string;
  timestamp: string;
  payload: unknown;
}

/** Parses a stored row into its kind's typed event, or throws InvalidEventError saying what is wrong. */
export const parseStoredEvent = (row: EventRow): StoredEvent => {
  const schema = payloadSchemas.get(row.kind);
  if (!schema) {
    throw new InvalidEventError(
      row.id,
      `Event ${row.id} has an unknown kind "${row.kind}" (known: ${eventKinds.join(", ")})`,
    );
  }
  if (!isEventSource(row.source)) {
    throw new InvalidEventError(row.id, `Event ${row.id} (${row.kind}) has an unknown source "${row.source}"`);
  }
  const parsed = schema.safeParse(row.payload);
  if (!parsed.success) {
    throw new InvalidEventError(
      row.id,
      `Event ${row.id} (${row.kind}) does not match its schema:\n${z.prettifyError(parsed.error)}`,
    );
  }
  // The payload was parsed by the schema its kind selects, so kind and payload agree; TypeScript
  // cannot follow that through the lookup, so this is the one place the pair is asserted.
  const { id, conversationId, seq, kind, timestamp } = row;
  return { id, conversationId, seq, kind, source: row.source, timestamp, payload: parsed.data } as StoredEvent;
};

/** Event JSON as clients see it: `{ id, kind, source, timestamp, ...payload }`. */
export const eventToJson = (e: StoredEvent): EventJson =>
  // Each payload is its kind's fields without the head, so payload plus head is that kind's
  // EventJson; TypeScript does not keep the pairing of `kind` and `payload` through a spread.
  ({
    // The SDK's AgentErrorEvent requires tool_name and tool_call_id: a run's own error (no tool
    // call) carries them empty, so an OpenHands client can read it.
    ...(e.kind === "AgentErrorEvent" ? { tool_name: "", tool_call_id: "" } : {}),
    ...e.payload,
    id: e.id,
    kind: e.kind,
    source: e.source,
    timestamp: e.timestamp,
  }) as EventJson;
