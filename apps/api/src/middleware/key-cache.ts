import { type Logger, withTimeout } from "@tern/core";
import type { CredentialChange } from "@tern/services";
import type { Redis } from "ioredis";

/** What an API key resolves to, as the cache keeps it. */
export interface CachedKey {
  keyId: string;
  userId: string;
  isAdmin: boolean;
  /** Epoch ms; null: never (every key has one today, but the column allows none). */
  expiresAtMs: number | null;
}

/**
 * API keys resolved by this process, by key hash, so an authenticated request costs no database
 * round trip for its key. Every replica subscribes to the deployment's credential channel; a
 * revocation anywhere publishes there and each replica drops the key before the revoking request
 * answers, or a moment after. An entry also lives at most `ttlMs`, and a key past its expires_at
 * fails on time from the cache itself.
 *
 * Fail-closed: while the subscription is not confirmed (at start, or once the connection dropped
 * until it is back and subscribed again), the cache is empty and serves nothing, so a missed
 * message can never leave a revoked key working.
 */
export interface KeyCache {
  /** The entry of a hash: undefined when unknown, stale, or while the cache is bypassed. */
  get: (hash: string, now?: number) => CachedKey | undefined;
  /** The invalidation generation; take it before a database lookup and hand it to `set`. */
  readonly epoch: number;
  /** Keeps a lookup's result, unless an invalidation happened since `epoch` was taken. */
  set: (hash: string, entry: CachedKey, epoch: number) => void;
  /** Drops matching entries here, then tells every replica (CredentialEvents of the services). */
  publish: (change: CredentialChange) => Promise<void>;
  /** True while the subscription is confirmed and entries may be served. */
  readonly live: boolean;
  readonly size: number;
  /** Counters for tests and the bench: hits served without the database, and misses. */
  readonly stats: { hits: number; misses: number };
  /** Ends the subscription. */
  close: () => Promise<void>;
}

const DEFAULT_KEY_CACHE_MAX_ENTRIES = 10_000;
// A publish that Redis does not answer in this long is given up (logged): the TTL still bounds it.
const PUBLISH_TIMEOUT_MS = 2_000;

const credentialChannel = (prefix: string) => `${prefix}:credentials`;

const parseChange = (message: string): CredentialChange | null => {
  try {
    const v = JSON.parse(message) as Record<string, unknown>;
    if (typeof v.keyId === "string") return { keyId: v.keyId };
    if (typeof v.userId === "string") return { userId: v.userId };
  } catch {
    // Below: an unreadable message drops everything.
  }
  return null;
};

export const createKeyCache = (opts: {
  redis: Redis;
  prefix: string;
  ttlMs: number;
  logger: Logger;
  maxEntries?: number;
}): KeyCache => {
  const { redis, ttlMs, logger } = opts;
  const maxEntries = opts.maxEntries ?? DEFAULT_KEY_CACHE_MAX_ENTRIES;
  const channel = credentialChannel(opts.prefix);
  // Map keeps insertion order: a hit re-inserts its entry, so the first one is the least recently used.
  const entries = new Map<string, CachedKey & { until: number }>();
  const stats = { hits: 0, misses: 0 };
  let epoch = 0;
  let live = false;
  let closed = false;
  // Counts connections: a SUBSCRIBE confirmed after its connection dropped must not turn the cache on.
  let connection = 0;

  const clear = () => {
    epoch++;
    entries.clear();
  };
  const drop = (change: CredentialChange | null) => {
    epoch++;
    if (change === null) return void entries.clear();
    for (const [hash, e] of entries) {
      if ("keyId" in change ? e.keyId === change.keyId : e.userId === change.userId) entries.delete(hash);
    }
  };

  // A connection of its own (a subscribed connection can do nothing else); it resubscribes itself
  // on every reconnect below, and only a confirmed SUBSCRIBE turns the cache back on.
  const sub = redis.duplicate({
    autoResubscribe: false,
    connectionName: `${opts.prefix}:key-cache`,
    lazyConnect: true,
  });
  const down = () => {
    if (live) logger.warn("credential channel lost: API keys are checked in Postgres until it is back");
    connection++;
    live = false;
    clear();
  };
  sub.on("error", (err) => logger.debug({ err }, "credential channel connection error"));
  sub.on("close", down);
  sub.on("end", down);
  sub.on("ready", () => {
    const mine = ++connection;
    sub.subscribe(channel).then(
      () => {
        if (closed || mine !== connection) return;
        // Nothing cached while down; empty it anyway so no entry predates the subscription.
        clear();
        live = true;
      },
      (err) => logger.warn({ err }, "could not subscribe to the credential channel"),
    );
  });
  sub.on("message", (ch: string, message: string) => {
    if (ch === channel) drop(parseChange(message));
  });
  if (ttlMs > 0) sub.connect().catch((err) => logger.warn({ err }, "credential channel did not connect"));

  return {
    get: (hash, now = Date.now()) => {
      if (!live) return undefined;
      const e = entries.get(hash);
      if (!e || e.until <= now) {
        if (e) entries.delete(hash);
        stats.misses++;
        return undefined;
      }
      entries.delete(hash);
      entries.set(hash, e);
      stats.hits++;
      return e;
    },
    get epoch() {
      return epoch;
    },
    set: (hash, entry, at) => {
      if (!live || at !== epoch) return;
      entries.set(hash, { ...entry, until: Date.now() + ttlMs });
      if (entries.size > maxEntries) {
        const oldest = entries.keys().next().value;
        if (oldest !== undefined) entries.delete(oldest);
      }
    },
    publish: async (change) => {
      drop(change);
      try {
        await withTimeout(redis.publish(channel, JSON.stringify(change)), PUBLISH_TIMEOUT_MS, "publish timed out");
      } catch (err) {
        // The change is committed; replicas that keep their subscription but missed this drop the
        // entry at its TTL (a replica that lost Redis has bypassed its cache since).
        logger.error({ err, change }, "could not publish a credential change to the other API replicas");
      }
    },
    get live() {
      return live;
    },
    get size() {
      return entries.size;
    },
    stats,
    close: async () => {
      closed = true;
      live = false;
      clear();
      sub.disconnect();
    },
  };
};
