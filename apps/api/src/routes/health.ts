import { Hono } from "hono";
import { sql } from "kysely";
import type { ApiDeps } from "../deps.ts";

const withTimeout = <T>(p: Promise<T>, ms: number): Promise<T> =>
  Promise.race([
    p,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)),
  ]);

const describe = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** `/health`: the process runs. `/ready`: Postgres and Redis answer, and Redis will not evict jobs. */
export const healthRoutes = (deps: ApiDeps) =>
  new Hono()
    .get("/health", (c) => c.json({ status: "ok" }))
    .get("/ready", async (c) => {
      const checks: Record<string, string> = {};
      await Promise.all([
        withTimeout(sql`select 1`.execute(deps.db), 2_000).then(
          () => {
            checks.postgres = "ok";
          },
          (err) => {
            checks.postgres = `unreachable: ${describe(err)}`;
          },
        ),
        withTimeout(deps.redis.config("GET", "maxmemory-policy") as Promise<string[]>, 2_000).then(
          (reply) => {
            const policy = reply?.[1];
            checks.redis = policy === "noeviction" ? "ok" : `maxmemory-policy is ${policy}, must be noeviction`;
          },
          (err) => {
            // Managed Redis may forbid CONFIG; a plain PING then proves it answers.
            return withTimeout(deps.redis.ping(), 2_000).then(
              () => {
                checks.redis = /unknown command|NOPERM/i.test(describe(err)) ? "ok" : `unreachable: ${describe(err)}`;
              },
              (err2) => {
                checks.redis = `unreachable: ${describe(err2)}`;
              },
            );
          },
        ),
      ]);
      const failing = Object.entries(checks).filter(([, v]) => v !== "ok");
      if (failing.length === 0) return c.json({ status: "ok", checks });
      return c.json(
        {
          error: {
            code: "service_unavailable",
            message: `not ready: ${failing.map(([k, v]) => `${k} ${v}`).join("; ")}`,
            details: { checks },
          },
        },
        503,
      );
    });
