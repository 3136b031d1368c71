import { readFileSync } from "node:fs";
import { toolCatalogue } from "@tern/agent/tools";
import { startStages, terminalExecutionStatuses, UnauthorizedError } from "@tern/core";
import { Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { z } from "zod";
import type { ApiDeps } from "../deps.ts";
import { kindOfKey } from "../middleware/auth.ts";
import { openPageSession, PAGE_COOKIE, sealPageSession } from "./session.ts";

const asset = (name: string) => readFileSync(new URL(`./${name}`, import.meta.url), "utf8");
const PAGE = asset("page.html");
/** The agent's built-in tools by name, from the agent's registry (one line per tool there). */
const TOOLS = toolCatalogue().map((t) => t.name);
/** The page's script, after the lists it needs from @tern/core and the agent (so the page never restates them). */
const SCRIPT = `const TERN_ENUMS = ${JSON.stringify({ STAGES: startStages, FINAL: terminalExecutionStatuses, TOOLS })};\n${asset("page.js")}`;
const STYLE = asset("page.css");

// Nothing but our own script and style runs on the page: an event's text could never load or run code.
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

const signInBody = z.object({ key: z.string().trim().min(1).max(512) });

/**
 * What the page offers to the key it signed in: an API key everything; a conversation's session
 * key Stop, Approve and Reject (what it may call on the app routes); a read-only key nothing but
 * watching, which is all that key may do anywhere.
 */
const sessionOfPage = (kind: Awaited<ReturnType<typeof kindOfKey>>) => ({
  signed_in: kind !== null,
  read_only: kind === "read_only",
  follow_up: kind === "api_key",
});

/**
 * The conversation page at `conversation_url` ({PUBLIC_URL}/conversations/{id}): one HTML page, its
 * script and style, all served from here (no build step, no CDN), and its sign-in, which turns a
 * pasted key into a short-lived cookie (see session.ts) that the API's auth accepts.
 */
export const pageRoutes = (deps: ApiDeps) => {
  const app = new Hono();
  const ttl = deps.config.PAGE_SESSION_TTL_SECONDS;
  const secure = deps.config.publicUrl.startsWith("https:");

  app.get("/conversations/assets/page.js", (c) =>
    c.body(SCRIPT, 200, { ...SECURITY_HEADERS, "content-type": "text/javascript; charset=utf-8" }),
  );
  app.get("/conversations/assets/page.css", (c) =>
    c.body(STYLE, 200, { ...SECURITY_HEADERS, "content-type": "text/css; charset=utf-8" }),
  );

  app.get("/conversations/session", async (c) => {
    const cookie = getCookie(c, PAGE_COOKIE);
    const key = cookie ? openPageSession(deps.secretBox, cookie) : null;
    const kind = key ? await kindOfKey(deps, key) : null;
    return c.json(sessionOfPage(kind), 200, SECURITY_HEADERS);
  });
  app.post("/conversations/session", async (c) => {
    const parsed = signInBody.safeParse(await c.req.json().catch(() => null));
    if (!parsed.success) throw new UnauthorizedError("Paste an API key, a session key or a read-only key");
    const kind = await kindOfKey(deps, parsed.data.key);
    if (!kind) throw new UnauthorizedError("The key is unknown, revoked or expired");
    setCookie(c, PAGE_COOKIE, sealPageSession(deps.secretBox, parsed.data.key, ttl), {
      httpOnly: true,
      sameSite: "Strict",
      path: "/",
      maxAge: ttl,
      secure,
    });
    return c.json(sessionOfPage(kind), 200, SECURITY_HEADERS);
  });
  app.delete("/conversations/session", (c) => {
    deleteCookie(c, PAGE_COOKIE, { path: "/" });
    return c.json(sessionOfPage(null), 200, SECURITY_HEADERS);
  });

  app.get("/conversations/:id", (c) =>
    c.body(PAGE, 200, { ...SECURITY_HEADERS, "content-type": "text/html; charset=utf-8" }),
  );
  return app;
};
