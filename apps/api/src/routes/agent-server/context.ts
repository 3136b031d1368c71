import { Hono } from "hono";
import type { ApiDeps } from "../../deps.ts";

/**
 * The agent-server API (OpenHands' `openhands-agent-server`) of one sandbox, served by tern's own
 * processes at `{PUBLIC_URL}/agent/{sandbox_id}`: no agent server runs in the sandbox.
 *
 * The mount (./index.ts) resolves the sandbox of the URL and authenticates the caller before any of
 * these routes runs; they read the result with `c.get("agentSandbox")` and act on that sandbox only.
 */
export interface AgentSandbox {
  /** The sandbox the URL names, which exists and belongs to `userId`. */
  sandboxId: string;
  userId: string;
  /** How the caller proved itself: a session key of the sandbox's conversation, or an owner's API key. */
  via: "session_key" | "api_key";
  /** The conversation whose session key was given (null for an API key, or a sandbox without one). */
  conversationId: string | null;
}

export interface AgentServerEnv {
  Variables: { agentSandbox: AgentSandbox };
}

/** A group of agent-server routes, with paths as the agent server has them (`/api/bash/...`). */
export type AgentServerRoutes = (deps: ApiDeps) => Hono<AgentServerEnv>;

export const newAgentServerRouter = () => new Hono<AgentServerEnv>();
