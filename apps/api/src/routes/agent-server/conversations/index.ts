import {
  confirmationPolicySchema,
  eventToJson,
  executionStatuses,
  type MessageContent,
  NotFoundError,
  parseIsoTimestamp,
} from "@tern/core";
import {
  agentFinalResponse,
  agentSendMessageSchema,
  assertAgentSandboxLive,
  conversationInfos,
  countConversations,
  countEvents,
  deleteAgentServerConversation,
  type EventQuery,
  eventsByIds,
  interruptConversation,
  pauseConversation,
  respondToConfirmation,
  runConversation,
  type SandboxScope,
  sandboxConversation,
  sandboxConversations,
  searchConversations,
  searchEvents,
  sendMessage,
  setConfirmationPolicy,
  startAgentServerConversation,
  updateAgentServerSecrets,
  updateConversation,
} from "@tern/services";
import type { Context } from "hono";
import { z } from "zod";
import type { ApiDeps } from "../../../deps.ts";
import { runStopsOf } from "../../follow-ups/interrupt.ts";
import type { AgentServerEnv, AgentServerRoutes } from "../context.ts";
import { newAgentServerRouter } from "../context.ts";
import { jsonBody, parseRequest } from "../errors.ts";

/**
 * `/api/conversations` and `/api/conversations/{id}/events` of the agent server, with
 * the bodies, status codes and ConversationInfo shape of openhands-agent-server's
 * conversation_router.py and event_router.py. Only the conversations of the sandbox the URL names;
 * everything goes through the same services as the app server's routes.
 */

type C = Context<AgentServerEnv>;

/** The conversation a conversation's own key is held to (its agent server is that conversation's); none otherwise. */
const ownConversationOf = (c: C): string | undefined => {
  const s = c.get("agentSandbox");
  return s.via === "conversation_key" && s.conversationId ? s.conversationId : undefined;
};

const scopeOf = (c: C): SandboxScope => {
  const s = c.get("agentSandbox");
  const conversationId = ownConversationOf(c);
  return { sandboxId: s.sandboxId, userId: s.userId, ...(conversationId ? { conversationId } : {}) };
};

/**
 * The caller the app-server services take: the sandbox's owner, held to its own conversation when
 * the key is a conversation's (the sandbox's own key and the owner's API key reach every one).
 */
const callerOf = (c: C) => {
  const conversationId = ownConversationOf(c);
  return { userId: c.get("agentSandbox").userId, ...(conversationId ? { conversationId } : {}) };
};

const limitParam = z.coerce.number().int().gt(0).lte(100).default(100);

const timestampParam = z
  .string()
  .refine((v) => parseIsoTimestamp(v) !== null, "must be an ISO 8601 datetime")
  .optional();

const eventFilterParams = {
  kind: z.string().optional(),
  source: z.string().optional(),
  body: z.string().optional(),
  timestamp__gte: timestampParam,
  timestamp__lt: timestampParam,
};

const toEventQuery = (q: {
  kind?: string | undefined;
  source?: string | undefined;
  body?: string | undefined;
  timestamp__gte?: string | undefined;
  timestamp__lt?: string | undefined;
}): EventQuery => ({
  ...(q.kind !== undefined ? { kind: q.kind as EventQuery["kind"] } : {}),
  ...(q.source !== undefined ? { source: q.source } : {}),
  ...(q.body !== undefined ? { body: q.body } : {}),
  ...(q.timestamp__gte !== undefined ? { timestampGte: parseIsoTimestamp(q.timestamp__gte)?.text } : {}),
  ...(q.timestamp__lt !== undefined ? { timestampLt: parseIsoTimestamp(q.timestamp__lt)?.text } : {}),
});

const conversationSearchQuery = z.object({
  page_id: z.string().optional(),
  limit: limitParam,
  status: z.enum(executionStatuses).optional(),
  sort_order: z.enum(["CREATED_AT", "UPDATED_AT", "CREATED_AT_DESC", "UPDATED_AT_DESC"]).default("CREATED_AT_DESC"),
});

/** `?ids=` of the batch read: at least one, fewer than 100 (the agent server's bound). */
const batchQuery = z.object({ ids: z.array(z.string()).min(1).max(99) });

/** A message sent to the conversation: only the user's. */
const userMessageSchema = agentSendMessageSchema.refine((m) => m.role === "user", {
  path: ["role"],
  message: "only user messages can be sent",
});

const success = (c: C) => c.json({ success: true }, 200);

export const agentConversationRoutes: AgentServerRoutes = (deps: ApiDeps) => {
  const r = newAgentServerRouter();
  const llm = {
    llmModels: {
      LLM_PROVIDER: deps.config.LLM_PROVIDER,
      LLM_MODELS: deps.config.LLM_MODELS ?? [],
    },
    llmUserBaseUrls: deps.config.LLM_USER_BASE_URLS ?? [],
  };
  const infos = (list: Parameters<typeof conversationInfos>[1]) => conversationInfos(deps, list);
  const one = async (c: C, id: string) => (await infos([await sandboxConversation(deps, scopeOf(c), id)]))[0];
  /** The sandbox's conversation named by the path, checked before a service acts on it. */
  const own = async (c: C) => sandboxConversation(deps, scopeOf(c), c.req.param("conversation_id") ?? "");

  // ---- conversations: reads

  r.get("/api/conversations/search", async (c) => {
    const q = parseRequest(conversationSearchQuery, c.req.query(), "query");
    const page = await searchConversations(deps, callerOf(c), {
      filter: {
        sandboxId: scopeOf(c).sandboxId,
        conversationId: ownConversationOf(c),
        includeSubConversations: true,
        ...(q.status ? { executionStatus: q.status } : {}),
      },
      order: q.sort_order,
      limit: q.limit,
      pageId: q.page_id,
    });
    return c.json({ items: await infos(page.items), next_page_id: page.next_page_id }, 200);
  });

  r.get("/api/conversations/count", async (c) => {
    const q = parseRequest(z.object({ status: z.enum(executionStatuses).optional() }), c.req.query(), "query");
    const n = await countConversations(deps, callerOf(c), {
      sandboxId: scopeOf(c).sandboxId,
      conversationId: ownConversationOf(c),
      includeSubConversations: true,
      ...(q.status ? { executionStatus: q.status } : {}),
    });
    return c.json(n, 200);
  });

  r.get("/api/conversations", async (c) => {
    const { ids } = parseRequest(batchQuery, { ids: c.req.queries("ids") }, "query");
    return c.json(await infos(await sandboxConversations(deps, scopeOf(c), ids)), 200);
  });

  r.get("/api/conversations/:conversation_id", async (c) => c.json(await one(c, c.req.param("conversation_id")), 200));

  r.get("/api/conversations/:conversation_id/agent_final_response", async (c) => {
    const conversation = await own(c);
    return c.json({ response: await agentFinalResponse(deps, conversation.id) }, 200);
  });

  // ---- conversations: writes

  r.post("/api/conversations", async (c) => {
    const { conversation, created } = await startAgentServerConversation(
      { ...deps, ...llm },
      scopeOf(c),
      await jsonBody(c),
    );
    const [info] = await infos([conversation]);
    return c.json(info, created ? 201 : 200);
  });

  r.patch("/api/conversations/:conversation_id", async (c) => {
    const body = parseRequest(
      z.looseObject({ title: z.string().min(1).max(200).nullish(), tags: z.record(z.string(), z.string()).nullish() }),
      await jsonBody(c),
      "body",
    );
    const conversation = await own(c);
    if (body.title != null) await updateConversation(deps, callerOf(c), conversation.id, { title: body.title });
    return success(c);
  });

  r.delete("/api/conversations/:conversation_id", async (c) => {
    await deleteAgentServerConversation(deps, scopeOf(c), c.req.param("conversation_id"));
    return success(c);
  });

  r.post("/api/conversations/:conversation_id/run", async (c) => {
    const conversation = await own(c);
    await assertAgentSandboxLive(deps, scopeOf(c).sandboxId);
    await runConversation(deps, callerOf(c), conversation.id);
    return success(c);
  });

  r.post("/api/conversations/:conversation_id/pause", async (c) => {
    const conversation = await own(c);
    await pauseConversation({ ...deps, publish: runStopsOf(deps) }, callerOf(c), conversation.id);
    return success(c);
  });

  r.post("/api/conversations/:conversation_id/interrupt", async (c) => {
    const conversation = await own(c);
    await interruptConversation({ ...deps, publish: runStopsOf(deps) }, callerOf(c), conversation.id);
    return success(c);
  });

  r.post("/api/conversations/:conversation_id/secrets", async (c) => {
    const body = parseRequest(z.object({ secrets: z.record(z.string(), z.unknown()) }), await jsonBody(c), "body");
    await updateAgentServerSecrets(deps, scopeOf(c), c.req.param("conversation_id"), body.secrets);
    return success(c);
  });

  r.post("/api/conversations/:conversation_id/confirmation_policy", async (c) => {
    const body = parseRequest(z.object({ policy: confirmationPolicySchema }), await jsonBody(c), "body");
    const conversation = await own(c);
    await setConfirmationPolicy(deps, callerOf(c), conversation.id, body.policy);
    return success(c);
  });

  // ---- events

  r.get("/api/conversations/:conversation_id/events/search", async (c) => {
    const q = parseRequest(
      z.object({
        page_id: z.string().optional(),
        limit: limitParam,
        sort_order: z.enum(["TIMESTAMP", "TIMESTAMP_DESC"]).default("TIMESTAMP"),
        ...eventFilterParams,
      }),
      c.req.query(),
      "query",
    );
    const conversation = await own(c);
    const page = await searchEvents(deps, callerOf(c), conversation.id, {
      query: toEventQuery(q),
      order: q.sort_order === "TIMESTAMP_DESC" ? "desc" : "asc",
      limit: q.limit,
      pageId: q.page_id,
    });
    return c.json({ items: page.items.map(eventToJson), next_page_id: page.next_page_id }, 200);
  });

  r.get("/api/conversations/:conversation_id/events/count", async (c) => {
    const q = parseRequest(z.object(eventFilterParams), c.req.query(), "query");
    const conversation = await own(c);
    return c.json(await countEvents(deps, callerOf(c), conversation.id, toEventQuery(q)), 200);
  });

  r.get("/api/conversations/:conversation_id/events", async (c) => {
    // FastAPI reads this route's `event_ids: list[str]` from the body; `?event_ids=` is taken too.
    // At most 100, as every batch read.
    const eventIds = z.array(z.string()).max(100);
    let ids = parseRequest(eventIds, c.req.queries("event_ids") ?? [], "query");
    if (ids.length === 0 && c.req.header("content-type")?.includes("json")) {
      ids = parseRequest(eventIds, await jsonBody(c), "body");
    }
    const conversation = await own(c);
    const events = await eventsByIds(deps, callerOf(c), conversation.id, ids);
    return c.json(
      events.map((e) => (e ? eventToJson(e) : null)),
      200,
    );
  });

  r.get("/api/conversations/:conversation_id/events/:event_id", async (c) => {
    const conversation = await own(c);
    const [event] = await eventsByIds(deps, callerOf(c), conversation.id, [c.req.param("event_id")]);
    if (!event) throw new NotFoundError("Not Found");
    return c.json(eventToJson(event), 200);
  });

  r.post("/api/conversations/:conversation_id/events", async (c) => {
    const body = parseRequest(userMessageSchema, await jsonBody(c), "body");
    const conversation = await own(c);
    if (body.run) await assertAgentSandboxLive(deps, scopeOf(c).sandboxId);
    await sendMessage(deps, callerOf(c), conversation.id, { content: body.content as MessageContent[], run: body.run });
    return success(c);
  });

  r.post("/api/conversations/:conversation_id/events/respond_to_confirmation", async (c) => {
    const body = parseRequest(
      z.object({ accept: z.boolean(), reason: z.string().default("User rejected the action.") }),
      await jsonBody(c),
      "body",
    );
    const conversation = await own(c);
    if (body.accept) await assertAgentSandboxLive(deps, scopeOf(c).sandboxId);
    await respondToConfirmation(deps, callerOf(c), conversation.id, body);
    return success(c);
  });

  return r;
};
