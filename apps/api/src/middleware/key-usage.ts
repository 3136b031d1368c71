import { type Logger, startPeriodicTask } from "@tern/core";
import type { ApiKeysRepository } from "@tern/db";

/**
 * Keeps api_keys.last_used_at without a write per request: used key ids are collected in memory
 * and written in one statement every few seconds, and once more at shutdown.
 */
export interface KeyUsage {
  record: (keyId: string) => void;
  flush: () => Promise<void>;
  /** Stops the timer and writes what is left. */
  stop: () => Promise<void>;
}

export const createKeyUsage = (repo: ApiKeysRepository, logger: Logger, intervalMs = 5_000): KeyUsage => {
  let pending = new Set<string>();
  const flush = async () => {
    if (pending.size === 0) return;
    const ids = [...pending];
    pending = new Set();
    try {
      await repo.touch(ids);
    } catch (err) {
      // Keep them for the next round: last_used_at is a hint, never worth failing a request over.
      for (const id of ids) pending.add(id);
      logger.warn({ err }, "could not record API key usage");
    }
  };
  const flushing = startPeriodicTask("recording API key usage", flush, {
    everyMs: intervalMs,
    firstAfterMs: intervalMs,
  });
  return {
    record: (keyId) => void pending.add(keyId),
    flush,
    stop: async () => {
      await flushing.stop();
      await flush();
    },
  };
};
