import { apiKeysRepository } from "@tern/db";
import { Hono } from "hono";
import { createMiddleware } from "hono/factory";
import type { ApiDeps } from "../../deps.ts";
import type { AuthEnv } from "../../middleware/auth.ts";
import { errorResponse } from "../../middleware/errors.ts";
import { createKeyUsage } from "../../middleware/key-usage.ts";
import { notFoundOrMethodNotAllowed } from "../../middleware/not-found.ts";
import { rejectNulCharacters } from "../../middleware/nul-characters.ts";
import { createRateLimiter, rateLimit } from "../../middleware/rate-limit.ts";
import { authenticateAgentKey, presentedKey } from "./auth.ts";
import type { AgentServerEnv } from "./context.ts";
import { agentConversationRoutes } from "./conversations/index.ts";
import { registerAgentEventSocket } from "./events-socket.ts";
import { registerAgentHealth } from "./health.ts";
import { agentSandboxOpsRoutes } from "./sandbox-ops/index.ts";

/** Where app.ts mounts the agent server of each sandbox. */
export const AGENT_SERVER_MOUNT = "/agent/:sandbox_id";

/** The mount's variables: the sandbox and caller (for the route groups), the principal (for the limiter and services). */
type MountEnv = { Variables: AgentServerEnv["Variables"] & AuthEnv["Variables"] };

/**
 * The agent-server API (OpenHands' `openhands-agent-server`) of the sandbox the URL names, at
 * `/agent/{sandbox_id}`: its paths below that are the agent server's own.
 * - `/alive`, `/health`, `/ready`, `/server_info`: open, as the agent server has them.
 * - `/sockets/events/{id}`: authenticates itself (a first frame, or the legacy query key).
 * - everything else: `X-Session-API-Key` (a session key of a conversation of THIS sandbox, or an
 *   API key of its owner; `Authorization: Bearer <API key>` too), then the same per-key rate limit
 *   as the app routes, then the route groups, which read `c.get("agentSandbox")`.
 * Errors carry FastAPI's `detail` (tern's error body has it); an unknown path is 404, a known one
 * with another method 405.
 */
export const agentServerRoutes = (deps: ApiDeps): Hono => {
  const keyUsage = deps.keyUsage ?? createKeyUsage(apiKeysRepository(deps.db), deps.logger);
  const limiter =
    deps.rateLimiter === undefined
      ? createRateLimiter(deps.redis, deps.config.REDIS_PREFIX, deps.config)
      : deps.rateLimiter;
  const router = new Hono<MountEnv>();
  router.onError((err, c) => errorResponse(err, c, deps.logger));

  registerAgentHealth(router, deps);
  registerAgentEventSocket(router, deps, keyUsage, limiter);

  router.use(
    "*",
    createMiddleware<MountEnv>(async (c, next) => {
      const caller = await authenticateAgentKey(deps, keyUsage, c.req.param("sandbox_id") ?? "", presentedKey(c));
      c.set("agentSandbox", caller.sandbox);
      c.set("principal", caller.principal);
      await next();
    }),
  );
  // biome-ignore lint/suspicious/noExplicitAny: the limiter's middleware reads `principal`, which MountEnv sets.
  if (limiter) router.use("*", rateLimit(limiter) as any);
  router.use("*", rejectNulCharacters());

  for (const group of [agentConversationRoutes, agentSandboxOpsRoutes]) {
    router.route("/", group(deps) as unknown as Hono<MountEnv>);
  }

  const missing = notFoundOrMethodNotAllowed(
    () => router.routes.map((r) => ({ method: r.method, path: `${AGENT_SERVER_MOUNT}${r.path}` })),
    { notFound: "Not Found", methodNotAllowed: "Method Not Allowed" },
  );
  router.all("*", (c) => missing(c));
  return router as unknown as Hono;
};
