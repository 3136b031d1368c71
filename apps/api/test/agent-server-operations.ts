import { toHexId } from "@tern/core";
import { agentServerContract, type ContractRoute, routeKey, SERVED } from "./agent-server-contract.ts";
import { fillPath } from "./openapi-operations.ts";

/**
 * The agent-server routes behind the key, for the security suite: the tenancy matrix and the input
 * fuzz walk the route list of the committed contract (fixtures/openhands/agent-server.json) that
 * tern serves, so a route served later is in both without touching them. Each needs a valid
 * request of its owner's (VALID): a route without one fails the sweeps' check that lists them.
 */

/** Every route of the contract that tern serves behind X-Session-API-Key (the socket authenticates itself). */
export const keyedAgentRoutes = (): ContractRoute[] =>
  agentServerContract.routes.filter((r) => r.auth && r.method !== "WEBSOCKET" && routeKey(r) in SERVED);

/** The ids a valid request names: a conversation of the sandbox, one of its events, one of its bash events. */
export interface AgentIds {
  conversation_id: string;
  event_id: string;
  bash_event_id: string;
}

export interface AgentRequest {
  query?: Record<string, string | string[]>;
  json?: unknown;
  /** A multipart/form-data body with one file field (the upload). */
  file?: { field: string; content: string };
}

/** A StartConversationRequest of a client-named LLM, with no message: nothing runs. */
const startRequest = (llmBaseUrl: string) => ({
  agent: {
    kind: "Agent",
    llm: { model: "gpt-tenancy", base_url: llmBaseUrl, api_key: "sk-tenancy-client-key", usage_id: "agent" },
    tools: [{ name: "terminal", params: {} }],
  },
  workspace: { kind: "LocalWorkspace", working_dir: "/workspace" },
});

/** A valid request of each keyed route, by route key, naming `ids`. */
export const validAgentRequest = (route: string, ids: AgentIds, llmBaseUrl: string): AgentRequest | undefined =>
  (
    ({
      "GET /api/conversations/search": {},
      "GET /api/conversations/count": {},
      "GET /api/conversations": { query: { ids: [ids.conversation_id] } },
      "GET /api/conversations/{conversation_id}": {},
      "PATCH /api/conversations/{conversation_id}": { json: { title: "tenancy" } },
      "DELETE /api/conversations/{conversation_id}": {},
      "POST /api/conversations": { json: startRequest(llmBaseUrl) },
      "POST /api/conversations/{conversation_id}/run": {},
      "POST /api/conversations/{conversation_id}/pause": {},
      "POST /api/conversations/{conversation_id}/interrupt": {},
      "POST /api/conversations/{conversation_id}/secrets": { json: { secrets: { TENANCY_TOKEN: "tenancy-value" } } },
      "POST /api/conversations/{conversation_id}/confirmation_policy": { json: { policy: { kind: "AlwaysConfirm" } } },
      "GET /api/conversations/{conversation_id}/agent_final_response": {},
      "GET /api/conversations/{conversation_id}/events/search": {},
      "GET /api/conversations/{conversation_id}/events/count": {},
      "GET /api/conversations/{conversation_id}/events/{event_id}": {},
      "GET /api/conversations/{conversation_id}/events": { query: { event_ids: [ids.event_id] } },
      "POST /api/conversations/{conversation_id}/events": {
        json: { role: "user", content: [{ type: "text", text: "hello" }], run: false },
      },
      "POST /api/conversations/{conversation_id}/events/respond_to_confirmation": {
        json: { accept: false, reason: "no" },
      },
      "POST /api/bash/start_bash_command": { json: { command: "true" } },
      "POST /api/bash/execute_bash_command": { json: { command: "echo tenancy" } },
      "GET /api/bash/bash_events/search": {},
      "GET /api/bash/bash_events/{event_id}": {},
      "GET /api/bash/bash_events/": { query: { event_ids: [ids.bash_event_id] } },
      "DELETE /api/bash/bash_events": {},
      "POST /api/file/upload": { query: { path: "/workspace/tenancy.txt" }, file: { field: "file", content: "hi" } },
      "GET /api/file/download": { query: { path: "/workspace/project/.git/HEAD" } },
      "GET /api/git/changes": { query: { path: "/workspace/project" } },
      "GET /api/git/diff": { query: { path: "/workspace/project/README.md" } },
    }) as Record<string, AgentRequest>
  )[route];

/** The route's path under the sandbox's mount; `{event_id}` is a bash event's on the bash routes. */
export const agentPath = (sandboxId: string, r: ContractRoute, ids: Partial<AgentIds>): string => {
  const eventId = r.path.startsWith("/api/bash/") ? ids.bash_event_id : ids.event_id;
  const values = { conversation_id: ids.conversation_id, event_id: eventId };
  return `/agent/${toHexId(sandboxId)}${fillPath(
    r.path,
    Object.fromEntries(Object.entries(values).filter((e): e is [string, string] => e[1] !== undefined)),
  )}`;
};

/** A fetch init of `request`, with `headers` (the key) on top. */
export const agentInit = (method: string, request: AgentRequest, headers: Record<string, string>): RequestInit => {
  if (request.file) {
    const form = new FormData();
    form.append(request.file.field, new Blob([request.file.content]), "f.txt");
    return { method, headers, body: form };
  }
  if (request.json !== undefined) {
    return { method, headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(request.json) };
  }
  return { method, headers };
};

/** `?…` of a request's query (a list: the name repeated). */
export const queryString = (query: AgentRequest["query"] = {}): string => {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) for (const v of [value].flat()) q.append(name, v);
  return q.size > 0 ? `?${q}` : "";
};
