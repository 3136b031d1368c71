import { readFileSync } from "node:fs";
import { expect } from "vitest";
import { type FieldType, type Models, modelMatcher } from "./openhands-matcher.ts";

/**
 * OpenHands' agent-server contract, extracted from the openhands-agent-server package's routers and
 * models at a named commit by fixtures/openhands/extract_agent_server.py (fixtures/openhands/agent-server.json),
 * and how tern serves each of its routes. agent-server-contract.test.ts checks them; every route
 * group's test (conversations, events, bash, files, git) checks its answers with `checkResponse`.
 */
export interface ContractRoute {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "WEBSOCKET";
  path: string;
  router: string;
  function: string;
  path_params: string[];
  query: Record<string, FieldType>;
  body: { content_type: string; model?: string; field?: string } | null;
  response_model: string | null;
  status_codes?: number[];
  close_codes?: number[];
  /** Behind the agent server's X-Session-API-Key check (everything under /api). */
  auth: boolean;
}

export interface AgentServerContract {
  source: { repository: string; package: string; commit: string; version: string; routers: string[] };
  routes: ContractRoute[];
  models: Models;
}

export const agentServerContract = JSON.parse(
  readFileSync(new URL("./fixtures/openhands/agent-server.json", import.meta.url), "utf8"),
) as AgentServerContract;

export const routeKey = (r: Pick<ContractRoute, "method" | "path">) => `${r.method} ${r.path}`;

/** Which of tern's route groups serves a route (routes/agent-server/...). */
export type Server = "mount" | "conversations" | "sandbox-ops";

/** The routes tern serves, by the group that serves them. */
export const SERVED: Record<string, Server> = {
  "GET /alive": "mount",
  "GET /health": "mount",
  "GET /ready": "mount",
  "GET /server_info": "mount",
  "WEBSOCKET /sockets/events/{conversation_id}": "mount",
  ...Object.fromEntries(
    [
      "POST /api/bash/start_bash_command",
      "POST /api/bash/execute_bash_command",
      "GET /api/bash/bash_events/search",
      "GET /api/bash/bash_events/{event_id}",
      "GET /api/bash/bash_events/",
      "DELETE /api/bash/bash_events",
      "POST /api/file/upload",
      "GET /api/file/download",
      "GET /api/git/changes",
      "GET /api/git/diff",
    ].map((k) => [k, "sandbox-ops" as const]),
  ),
  ...Object.fromEntries(
    [
      "GET /api/conversations/search",
      "GET /api/conversations/count",
      "GET /api/conversations",
      "GET /api/conversations/{conversation_id}",
      "PATCH /api/conversations/{conversation_id}",
      "DELETE /api/conversations/{conversation_id}",
      "POST /api/conversations",
      "POST /api/conversations/{conversation_id}/run",
      "POST /api/conversations/{conversation_id}/pause",
      "POST /api/conversations/{conversation_id}/interrupt",
      "POST /api/conversations/{conversation_id}/secrets",
      "POST /api/conversations/{conversation_id}/confirmation_policy",
      "GET /api/conversations/{conversation_id}/agent_final_response",
      "GET /api/conversations/{conversation_id}/events/search",
      "GET /api/conversations/{conversation_id}/events/count",
      "GET /api/conversations/{conversation_id}/events/{event_id}",
      "GET /api/conversations/{conversation_id}/events",
      "POST /api/conversations/{conversation_id}/events",
      "POST /api/conversations/{conversation_id}/events/respond_to_confirmation",
    ].map((k) => [k, "conversations" as const]),
  ),
};

/** Routes of these routers that tern does not serve, each with its reason (the list only shrinks). */
export const NOT_SERVED: Record<string, string> = {
  ...Object.fromEntries(
    [
      "POST /api/conversations/{conversation_id}/goal",
      "POST /api/conversations/{conversation_id}/goal/stop",
      "POST /api/conversations/{conversation_id}/goal/resume",
    ].map((k) => [k, "goals are not a tern agent feature"]),
  ),
  "POST /api/conversations/{conversation_id}/security_analyzer": "tern's agent has one fixed risk analysis",
  "POST /api/conversations/{conversation_id}/switch_profile": "no agent profiles: the LLM is chosen at start",
  "POST /api/conversations/{conversation_id}/switch_llm": "the LLM is chosen at start; keys stay on the worker",
  "POST /api/conversations/{conversation_id}/load_plugin": "no plugins",
  "POST /api/conversations/{conversation_id}/switch_acp_model": "no ACP agents",
  "POST /api/conversations/{conversation_id}/ask_agent": "no side questions outside the conversation's history",
  "POST /api/conversations/{conversation_id}/condense": "condensation is the agent's own (no forced condense)",
  "POST /api/conversations/{conversation_id}/fork": "no conversation tree: one line of events",
  "POST /api/conversations/{conversation_id}/navigate": "no conversation tree: one line of events",
  "POST /api/file/create_directory": "not served (upload and download are)",
  "GET /api/file/home": "the GUI's file browser: not served",
  "GET /api/file/search_subdirs": "the GUI's file browser: not served",
  "GET /api/file/download-trajectory/{conversation_id}": "the app server's /download serves the trajectory",
  "GET /api/file/archive": "not served",
  "GET /api/git/commits": "not served (changes and diff are)",
  "GET /api/git/commits/{sha}/changes": "not served (changes and diff are)",
  "WEBSOCKET /sockets/bash-events": "not served: bash events are polled",
};

/**
 * Where our answers knowingly differ from the contract's models, each with its reason: a difference
 * not listed fails, and so does a listed one no checked answer shows any longer.
 */
export const KNOWN_GAPS: Record<string, string> = {};

const matcher = modelMatcher(agentServerContract.models);
export const { differences } = matcher;

const seenGaps = new Set<string>();
/** The listed gaps some checked answer showed (the contract test reports those none did). */
export const gapsSeen = (): ReadonlySet<string> => seenGaps;

/**
 * Asserts that `body` is what OpenHands' agent server answers as `model` (agent-server.json): every
 * field of theirs, of their type, null only where theirs may be. Differences listed in KNOWN_GAPS pass.
 */
export const checkResponse = (model: string, body: unknown): void => {
  const diffs = [...new Set(differences(model, body).map((d) => d.replace(/\[\d+\]/g, "[]")))];
  for (const d of diffs) if (d in KNOWN_GAPS) seenGaps.add(d);
  expect(
    diffs.filter((d) => !(d in KNOWN_GAPS)),
    `${model} differs from openhands-agent-server ${agentServerContract.source.version}`,
  ).toEqual([]);
};
