import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { HonoAdapter } from "@bull-board/hono";
import { serveStatic } from "@hono/node-server/serve-static";
import { Hono } from "hono";
import { setCookie } from "hono/cookie";
import type { ApiDeps } from "../../deps.ts";
import {
  ADMIN_COOKIE,
  ADMIN_SESSION_TTL_SECONDS,
  type AuthEnv,
  openAdminSession,
  requireAdmin,
} from "../../middleware/auth.ts";
import type { KeyUsage } from "../../middleware/key-usage.ts";

export const ADMIN_QUEUES_PATH = "/admin/queues";

/**
 * bull-board, for operators (admin keys) only. A browser cannot add headers to the dashboard's own
 * requests, so open `/admin/queues?token=<admin key>` once: the key is checked and exchanged for a
 * session of its own (a random id in an HttpOnly, SameSite=Strict cookie scoped to this path,
 * Secure over https, for ADMIN_SESSION_TTL_SECONDS), and the token is dropped from the address. The
 * key never sits in the cookie; every later request checks the key behind the session again, so
 * revoking the key ends it, and the dashboard's actions must carry this deployment's Origin.
 */
export const adminQueueRoutes = (deps: ApiDeps, keyUsage: KeyUsage) => {
  const serverAdapter = new HonoAdapter(serveStatic);
  serverAdapter.setBasePath(ADMIN_QUEUES_PATH);
  createBullBoard({ queues: deps.queues.all.map((q) => new BullMQAdapter(q)), serverAdapter });

  const app = new Hono<AuthEnv>();
  app.use("*", requireAdmin(deps, keyUsage));
  app.use("*", async (c, next) => {
    const token = c.req.query("token");
    if (!token) return next();
    const principal = c.get("principal");
    if (principal.kind !== "api_key") return next();
    setCookie(c, ADMIN_COOKIE, await openAdminSession(deps, principal.keyId), {
      maxAge: ADMIN_SESSION_TTL_SECONDS,
      httpOnly: true,
      sameSite: "Strict",
      path: ADMIN_QUEUES_PATH,
      secure: deps.config.publicUrl.startsWith("https:"),
    });
    const url = new URL(c.req.url);
    url.searchParams.delete("token");
    return c.redirect(`${url.pathname}${url.search}`, 302);
  });
  app.route("/", serverAdapter.registerPlugin());
  return app;
};
