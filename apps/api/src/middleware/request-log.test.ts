import { createLogger } from "@tern/core";
import { Hono } from "hono";
import { requestId } from "hono/request-id";
import { describe, expect, it } from "vitest";
import { type AccessLogOptions, requestLog } from "./request-log.ts";

const logged = (opts: AccessLogOptions = { mode: "all", slowMs: 1_000 }) => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger("api", "info", { write: (line: string) => void lines.push(JSON.parse(line)) });
  const app = new Hono();
  app.use(requestId());
  app.use(requestLog(logger, opts));
  app.use("/api/*", async (c, next) => {
    if (!c.req.header("authorization")) return c.json({ error: "unauthorized" }, 401);
    await next();
  });
  app.get("/api/things/:id", (c) => c.json({ id: c.req.param("id") }));
  // Answers once the test lets it: a slow request, with no sleep.
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  app.get("/api/slow", async (c) => {
    await held;
    return c.json({ ok: true });
  });
  app.post("/api/fail", () => {
    throw new Error("boom");
  });
  app.onError((_err, c) => c.json({ error: "internal" }, 500));
  return { app, lines, release: () => release() };
};

describe("the request log", () => {
  it("writes one line per request: method, route, status, duration and the request id the client got", async () => {
    const { app, lines } = logged();
    const res = await app.request("/api/things/42", { headers: { authorization: "x" } });
    expect(res.status).toBe(200);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      msg: "request",
      method: "GET",
      route: "/api/things/:id",
      path: "/api/things/42",
      status: 200,
      request_id: res.headers.get("x-request-id"),
    });
    expect(lines[0]?.duration_ms).toBeTypeOf("number");
  });

  it("logs the status a middleware or the error handler answered with, and null for no route", async () => {
    const { app, lines } = logged();
    expect((await app.request("/api/things/7")).status).toBe(401);
    expect((await app.request("/api/fail", { method: "POST", headers: { authorization: "x" } })).status).toBe(500);
    expect((await app.request("/nowhere")).status).toBe(404);
    expect(lines.map((l) => [l.method, l.route, l.status])).toEqual([
      ["GET", "/api/things/:id", 401],
      ["POST", "/api/fail", 500],
      ["GET", null, 404],
    ]);
    expect(new Set(lines.map((l) => l.request_id)).size).toBe(3);
  });

  describe("ACCESS_LOG=errors", () => {
    it("leaves out a request that succeeded in time, and keeps every 4xx, 5xx and 404", async () => {
      const { app, lines } = logged({ mode: "errors", slowMs: 60_000 });
      expect((await app.request("/api/things/1", { headers: { authorization: "x" } })).status).toBe(200);
      expect(lines).toHaveLength(0);
      expect((await app.request("/api/things/7")).status).toBe(401);
      expect((await app.request("/api/fail", { method: "POST", headers: { authorization: "x" } })).status).toBe(500);
      expect((await app.request("/nowhere")).status).toBe(404);
      expect(lines.map((l) => [l.msg, l.method, l.route, l.status])).toEqual([
        ["request", "GET", "/api/things/:id", 401],
        ["request", "POST", "/api/fail", 500],
        ["request", "GET", null, 404],
      ]);
    });

    it("keeps a successful request that took the slow threshold or longer", async () => {
      const { app, lines, release } = logged({ mode: "errors", slowMs: 30 });
      const started = performance.now();
      const answered = app.request("/api/slow", { headers: { authorization: "x" } });
      // Held at least the threshold (by the clock, not by a fixed sleep), then let go.
      await new Promise<void>((resolve) => {
        const tick = () => (performance.now() - started >= 40 ? resolve() : setImmediate(tick));
        tick();
      });
      release();
      expect((await answered).status).toBe(200);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ msg: "request", route: "/api/slow", status: 200 });
      expect(lines[0]?.duration_ms as number).toBeGreaterThanOrEqual(30);
    });
  });
});
