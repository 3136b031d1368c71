import { withTimeout } from "@tern/core";
import { pingDatabase } from "@tern/services";
import { Hono } from "hono";
import type { ApiDeps } from "../deps.ts";
import { optionalPrincipal } from "../middleware/auth.ts";
import type { KeyUsage } from "../middleware/key-usage.ts";

const CHECK_TIMEOUT_MS = 2_000;
const answered = <T>(p: Promise<T>): Promise<T> =>
  withTimeout(p, CHECK_TIMEOUT_MS, `no answer within ${CHECK_TIMEOUT_MS} ms`);

const describe = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** What anyone may read of a check: its state in a word, never the error's own text (addresses, versions). */
const publicState = (v: string) => (v === "ok" ? "ok" : v.startsWith("unreachable") ? "unreachable" : "misconfigured");

/**
 * The workers alive, as the worker directory has them. Not a check: the API serves without any
 * (its starts wait, and say so), but a reader learns how many there are; an admin learns which,
 * on which engines, and what each could not set up (a disk limit it only watches, egress names
 * that do not resolve).
 */
const workersOf = async (deps: ApiDeps, admin: boolean) => {
  if (!deps.workerDirectory) return {};
  const live = await answered(deps.workerDirectory()).catch(() => null);
  if (!live) return { workers: { alive: null, note: "the worker directory could not be read" } };
  const note = live.length === 0 ? { note: "no worker is alive: starts are accepted and wait for one" } : {};
  if (!admin) return { workers: { alive: live.length, ...note } };
  return {
    workers: {
      alive: live.length,
      ...note,
      engines: [...new Set(live.flatMap((w) => (w.engineId ? [w.engineId] : [])))].sort(),
      list: live.map((w) => ({
        worker_id: w.workerId,
        engine_id: w.engineId,
        started_at: w.startedAt,
        disk_limit: w.diskLimit ?? null,
        egress_unresolved: w.egressUnresolved ?? [],
      })),
    },
  };
};

/**
 * `/health`: the process runs. `/ready`: Postgres and Redis answer, and Redis will not evict jobs.
 * Anyone learns which part is not ready; only an admin key sees why (the errors' text).
 */
export const healthRoutes = (deps: ApiDeps, keyUsage: KeyUsage) =>
  new Hono()
    .get("/health", (c) => c.json({ status: "ok" }))
    .get("/ready", async (c) => {
      const checks: Record<string, string> = {};
      await Promise.all([
        answered(pingDatabase(deps)).then(
          () => {
            checks.postgres = "ok";
          },
          (err) => {
            checks.postgres = `unreachable: ${describe(err)}`;
          },
        ),
        answered(deps.redis.config("GET", "maxmemory-policy") as Promise<string[]>).then(
          (reply) => {
            const policy = reply?.[1];
            checks.redis = policy === "noeviction" ? "ok" : `maxmemory-policy is ${policy}, must be noeviction`;
          },
          (err) => {
            // Managed Redis may forbid CONFIG; a plain PING then proves it answers.
            return answered(deps.redis.ping()).then(
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
      const admin = (await optionalPrincipal(c, deps, keyUsage))?.isAdmin === true;
      const shown = admin ? checks : Object.fromEntries(Object.entries(checks).map(([k, v]) => [k, publicState(v)]));
      const failing = Object.entries(shown).filter(([, v]) => v !== "ok");
      const workers = await workersOf(deps, admin);
      if (failing.length === 0) return c.json({ status: "ok", checks: shown, ...workers });
      return c.json(
        {
          detail: `not ready: ${failing.map(([k, v]) => `${k} ${v}`).join("; ")}`,
          error: {
            code: "service_unavailable",
            message: `not ready: ${failing.map(([k, v]) => `${k} ${v}`).join("; ")}`,
            details: { checks: shown },
          },
        },
        503,
      );
    });
