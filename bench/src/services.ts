import { generateApiKey } from "@tern/core";
import { startService } from "@tern/testing";
import pg from "pg";

/** The real API process, spawned as the tests spawn it (production log level: info). */
export const spawnApi = (databaseUrl: string, redisPrefix: string, env: Record<string, string> = {}) =>
  startService("api", { DATABASE_URL: databaseUrl, REDIS_PREFIX: redisPrefix, LOG_LEVEL: "info", ...env });

export const spawnWorker = (databaseUrl: string, redisPrefix: string, env: Record<string, string> = {}) =>
  startService("worker", { DATABASE_URL: databaseUrl, REDIS_PREFIX: redisPrefix, LOG_LEVEL: "info", ...env });

/** A new user with one key (admin when asked); returns the key. */
export const createKey = async (databaseUrl: string, opts: { admin?: boolean; userId?: string } = {}) => {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    let userId = opts.userId;
    if (!userId) {
      const r = await c.query<{ id: string }>(
        "insert into users (id, is_admin) values (gen_random_uuid(), $1) returning id",
        [opts.admin ?? false],
      );
      userId = r.rows[0]?.id as string;
    }
    const k = generateApiKey();
    await c.query(
      "insert into api_keys (id, user_id, name, prefix, key_hash) values (gen_random_uuid(), $1, 'bench', $2, $3)",
      [userId, k.prefix, k.hash],
    );
    return { key: k.key, userId };
  } finally {
    await c.end();
  }
};
