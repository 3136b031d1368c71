import { Hono } from "hono";
import { createMiddleware } from "hono/factory";
import type { ApiDeps } from "../../deps.ts";
import type { KeyUsage } from "../../middleware/key-usage.ts";
import { notFoundOrMethodNotAllowed } from "../../middleware/not-found.ts";
import { rejectNulCharacters } from "../../middleware/nul-characters.ts";
import { type RateLimiter, rateLimit } from "../../middleware/rate-limit.ts";
import { authenticateAgentKey, presentedKey } from "./auth.ts";
import type { AgentServerEnv } from "./context.ts";
import { agentConversationRoutes } from "./conversations/index.ts";
import { agentServerErrors } from "./errors.ts";
import { registerAgentEventSocket } from "./events-socket.ts";
import { registerAgentHealth } from "./health.ts";
import { agentSandboxOpsRoutes } from "./sandbox-ops/index.ts";

/** Where app.ts mounts the agent server of each sandbox. */
export const AGENT_SERVER_MOUNT = "/agent/:sandbox_id";

/** The agent server's file upload: its body streams to the sandbox under AGENT_FILE_UPLOAD_MAX_BYTES. */
export const AGENT_FILE_UPLOAD = /^\/agent\/[^/]+\/api\/file\/upload\/?$/;

/** What the mount takes beside the API's deps: the app's own key usage and rate limiter (null: none). */
export type AgentServerDeps = ApiDeps & { keyUsage: KeyUsage; rateLimiter: RateLimiter | null };

/**
 * The agent-server API (OpenHands' `openhands-agent-server`) of the sandbox the URL names, at
 * `/agent/{sandbox_id}`: its paths below that are the agent server's own.
 * - `/alive`, `/health`, `/ready`, `/server_info`: open, as the agent server has them.
 * - `/sockets/events/{id}`: authenticates itself (a first frame, or the legacy query key).
 * - everything else: `X-Session-API-Key` (a session key of a conversation of THIS sandbox, or an
 *   API key of its owner; `Authorization: Bearer <API key>` too), then the same per-key rate limit
 *   as the app routes, then the route groups, which read `c.get("agentSandbox")`.
 * Every error leaves through one handler (./errors.ts) as FastAPI's `{"detail": ...}`; an unknown
 * path is 404, a known one with another method 405.
 */
export const agentServerRoutes = (deps: AgentServerDeps): Hono<AgentServerEnv> => {
  const router = new Hono<AgentServerEnv>();
  router.onError(agentServerErrors(deps.logger));

  registerAgentHealth(router, deps);
  registerAgentEventSocket(router, deps, deps.keyUsage, deps.rateLimiter);

  router.use(
    "*",
    createMiddleware<AgentServerEnv>(async (c, next) => {
      const caller = await authenticateAgentKey(deps, deps.keyUsage, c.req.param("sandbox_id") ?? "", presentedKey(c));
      c.set("agentSandbox", caller.sandbox);
      c.set("principal", caller.principal);
      await next();
    }),
  );
  if (deps.rateLimiter) router.use("*", rateLimit(deps.rateLimiter));
  // The upload's bytes are the file's own, streamed under its cap: no check reads them.
  router.use("*", rejectNulCharacters({ streamed: (path) => AGENT_FILE_UPLOAD.test(path) }));

  for (const group of [agentConversationRoutes, agentSandboxOpsRoutes]) router.route("/", group(deps));

  const missing = notFoundOrMethodNotAllowed(
    () => router.routes.map((r) => ({ method: r.method, path: `${AGENT_SERVER_MOUNT}${r.path}` })),
    { notFound: "Not Found", methodNotAllowed: "Method Not Allowed" },
  );
  router.all("*", (c) => missing(c));
  return router;
};
