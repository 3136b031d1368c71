import { Hono } from "hono";
import type { ApiDeps } from "../../deps.ts";
import type { AuthEnv } from "../../middleware/auth.ts";

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
  /**
   * How the caller proved itself: a conversation's session key, the sandbox's own key (a sandbox
   * made by POST /api/v1/sandboxes), or an owner's API key.
   */
  via: "conversation_key" | "sandbox_key" | "api_key";
  /** The conversation whose session key was given (null for an API key, or a sandbox without one). */
  conversationId: string | null;
}

/** The mount's variables: the sandbox and caller (for the route groups), the principal (for the limiter and services). */
export interface AgentServerEnv {
  Variables: { agentSandbox: AgentSandbox } & AuthEnv["Variables"];
}

/** A group of agent-server routes, with paths as the agent server has them (`/api/bash/...`). */
export type AgentServerRoutes = (deps: ApiDeps) => Hono<AgentServerEnv>;

export const newAgentServerRouter = () => new Hono<AgentServerEnv>();
