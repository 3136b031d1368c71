import { execFileSync } from "node:child_process";
import { DEFAULT_API_KEY_MAX_LIFETIME_DAYS } from "@tern/core";
import { createDb } from "@tern/db";
import { createUserWithKey, issueApiKey } from "@tern/services";
import { repoRoot, startService, tenancyLimitsOff } from "@tern/testing";

/** The API and worker run compiled, as production runs them (startService): builds what changed. */
export const buildServices = (): void => {
  execFileSync(process.execPath, ["scripts/build.mjs"], { cwd: repoRoot, stdio: "ignore" });
};

/** On a shared 2-core machine under load a process may take well over the default 30 s to be ready. */
const SLOW_START = { timeoutMs: 120_000 };

/** The real API process, spawned as the tests spawn it (production log level: info). */
/** Without tenancy limits: the bench loads one deployment through one key, far past any tenant's limits. */
export const spawnApi = (databaseUrl: string, redisPrefix: string, env: Record<string, string> = {}) =>
  startService(
    "api",
    {
      DATABASE_URL: databaseUrl,
      REDIS_PREFIX: redisPrefix,
      LOG_LEVEL: "info",
      ...tenancyLimitsOff,
      ...env,
    },
    SLOW_START,
  );

export const spawnWorker = (databaseUrl: string, redisPrefix: string, env: Record<string, string> = {}) =>
  startService(
    "worker",
    { DATABASE_URL: databaseUrl, REDIS_PREFIX: redisPrefix, LOG_LEVEL: "info", ...env },
    SLOW_START,
  );

/** A key of a new user (admin when asked), or of an existing one; issued as the API and the CLI issue keys. */
export const createKey = async (databaseUrl: string, opts: { admin?: boolean; userId?: string } = {}) => {
  const { db, close } = createDb(databaseUrl, { max: 1 });
  const deps = { db, maxKeyLifetimeDays: DEFAULT_API_KEY_MAX_LIFETIME_DAYS };
  try {
    if (opts.userId) return { key: (await issueApiKey(deps, opts.userId, { name: "bench" })).key, userId: opts.userId };
    const { key, userId } = await createUserWithKey(deps, { admin: opts.admin ?? false, name: "bench" });
    return { key, userId };
  } finally {
    await close();
  }
};
