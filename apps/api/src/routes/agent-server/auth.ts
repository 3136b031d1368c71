import { API_KEY_PREFIX, NotFoundError, parseId, UnauthorizedError } from "@tern/core";
import { holderOfSessionKey, ownedSandboxes, sessionOf } from "@tern/services";
import type { Context } from "hono";
import type { ApiDeps } from "../../deps.ts";
import { type Principal, principalOfApiKey } from "../../middleware/auth.ts";
import type { KeyUsage } from "../../middleware/key-usage.ts";
import type { AgentSandbox } from "./context.ts";

/**
 * The agent server's own answer to a missing or wrong key (FastAPI's HTTPException(401)): the body
 * says no more than that, as OpenHands' `check_session_api_key` does.
 */
const agentUnauthorized = () => new UnauthorizedError("Unauthorized");

/** Unknown sandbox, or another user's: the same answer, so a sandbox id reveals nothing. */
const unknownSandbox = () => new NotFoundError("Not Found");

/** The key a request presents: X-Session-API-Key (a session key or an API key), else Authorization: Bearer. */
export const presentedKey = (c: Context): string | null => {
  const session = c.req.header("x-session-api-key")?.trim();
  if (session) return session;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header("authorization") ?? "")?.[1];
  if (bearer) return bearer;
  return c.req.header("x-access-token")?.trim() || null;
};

/** Who a valid key is: the sandbox it opens, and the app routes' principal (the services' caller, the limiter's key). */
export interface AgentCaller {
  sandbox: AgentSandbox;
  principal: Principal;
}

/**
 * Authenticates `key` for the agent server of the sandbox `rawSandboxId` names:
 * - a session key is accepted only by its own conversation's sandbox, and a sandbox's own key
 *   (POST /api/v1/sandboxes) only by that sandbox; another sandbox's is 401, whether or not that
 *   sandbox exists (the key says which sandbox it opens, nothing else);
 * - an owner's API key opens any sandbox of that owner; a sandbox that is unknown or another
 *   user's is 404 alike.
 */
export const authenticateAgentKey = async (
  deps: ApiDeps,
  keyUsage: KeyUsage,
  rawSandboxId: string,
  key: string | null,
): Promise<AgentCaller> => {
  if (!key) throw agentUnauthorized();
  const sandboxId = parseId(rawSandboxId);
  // An API key (its prefix says so; session keys are `sess_…`) is never a session key: no lookup.
  const holder = key.startsWith(API_KEY_PREFIX) ? null : await holderOfSessionKey(deps, key);
  // A read-only key watches through the app routes; no agent-server route is only a read.
  if (holder?.kind === "read_only") throw agentUnauthorized();
  if (holder) {
    const session = sessionOf(holder);
    if (sandboxId === null || session.sandboxId !== sandboxId) throw agentUnauthorized();
    // A sandbox's own key draws on the limiter as `session:<its conversation or itself>`, a budget
    // of its own like a conversation key's.
    return {
      sandbox: {
        sandboxId,
        userId: session.userId,
        via: holder.kind === "conversation" ? "conversation_key" : "sandbox_key",
        conversationId: holder.kind === "conversation" ? holder.conversation.id : holder.sandbox.conversationId,
      },
      principal: { kind: "session", userId: session.userId, isAdmin: false, conversationId: session.conversationId },
    };
  }
  const principal = await principalOfApiKey(deps, keyUsage, key);
  if (!principal) throw agentUnauthorized();
  if (sandboxId === null) throw unknownSandbox();
  const [sandbox] = await ownedSandboxes(deps, principal, [sandboxId]);
  if (!sandbox) throw unknownSandbox();
  return { sandbox: { sandboxId, userId: principal.userId, via: "api_key", conversationId: null }, principal };
};
