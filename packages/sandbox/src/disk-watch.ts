import { startPeriodicTask } from "@tern/core";
import type { SandboxDriver, SandboxInfo } from "./driver.ts";

export interface DiskWatchOptions {
  driver: Pick<SandboxDriver, "list" | "writtenBytes">;
  /** The sandboxes watched: those carrying all of these labels. */
  labels: Record<string, string>;
  limitBytes: number;
  /**
   * The fastest a sandbox is taken to write, in bytes per second (a sandbox seen writing faster is
   * taken at its own rate). With the room left to the limit it sets when a sandbox is sampled next.
   */
  writeBytesPerSecond: number;
  /** A running sandbox that has written `bytes`, at or past the limit: stop it writing. */
  onOver: (sandbox: SandboxInfo, bytes: number) => Promise<void>;
  /** Each sample's duration, for /metrics. */
  onSample?: (ms: number) => void;
  onError?: (err: unknown) => void;
  /** Shortest time between two samples of one sandbox, and between two looks (default 250 ms). */
  minIntervalMs?: number;
  /** Longest time between two samples of one sandbox (default 10 s). */
  maxIntervalMs?: number;
  /** How often the list of sandboxes is read again (default 1 s). */
  listEveryMs?: number;
}

export interface DiskWatch {
  /**
   * Lists (when due) and samples every sandbox that is due, now or right after the look under way;
   * the timer calls it, tests may too. A failure goes to `onError`.
   */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

/** The time between two samples of a sandbox is at least this many times what one sample took. */
const SAMPLE_COST_FACTOR = 4;

interface Sampled {
  at: number;
  bytes: number;
  due: number;
  /** onOver was called for it and it has not run since. */
  stopped: boolean;
}

/**
 * When a sandbox that has written `bytes` is sampled next: half the time it would take to reach
 * the limit at `rate`, within the bounds. A sandbox far from its limit is looked at seldom; one
 * near it, often; the overshoot is about `rate` times the shortest interval (plus a sample's time).
 */
export const nextSampleInMs = (
  bytes: number,
  limitBytes: number,
  rate: number,
  bounds: { minMs: number; maxMs: number },
): number => {
  const headroom = Math.max(0, limitBytes - bytes);
  const ms = (headroom / Math.max(1, rate)) * 500;
  return Math.min(bounds.maxMs, Math.max(bounds.minMs, Math.floor(ms)));
};

/**
 * A disk limit held by sampling, for a backend that cannot hold one itself (Docker's overlay2 on
 * anything but XFS with pquota): each running sandbox's writes are measured at an interval scaled
 * to how soon it could reach the limit, and one at or past it is handed to `onOver` (which pauses
 * it) once, until it runs again.
 */
export const startDiskWatch = (opts: DiskWatchOptions): DiskWatch => {
  const minMs = opts.minIntervalMs ?? 250;
  const maxMs = opts.maxIntervalMs ?? 10_000;
  const listEveryMs = opts.listEveryMs ?? 1_000;
  const measure = opts.driver.writtenBytes;
  if (!measure) throw new Error("the sandbox driver cannot say what a sandbox wrote");
  const seen = new Map<string, Sampled>();
  let live: SandboxInfo[] = [];
  let listedAt = 0;

  const sample = async (sandbox: SandboxInfo, now: number) => {
    const before = seen.get(sandbox.ref);
    const began = performance.now();
    const bytes = await measure(sandbox.ref);
    const tookMs = performance.now() - began;
    opts.onSample?.(tookMs);
    if (bytes === null) {
      seen.delete(sandbox.ref);
      return;
    }
    const elapsed = before ? (now - before.at) / 1000 : 0;
    const seenRate = before && elapsed > 0 ? Math.max(0, bytes - before.bytes) / elapsed : 0;
    const rate = Math.max(opts.writeBytesPerSecond, seenRate);
    const entry: Sampled = {
      at: now,
      bytes,
      // A sample walks the sandbox's files (SizeRw): one with many costs more, and is looked at
      // less often, so the watch spends at most about a quarter of its time on one sandbox.
      due:
        now +
        nextSampleInMs(bytes, opts.limitBytes, rate, {
          minMs: Math.max(minMs, tookMs * SAMPLE_COST_FACTOR),
          maxMs: Math.max(maxMs, tookMs * SAMPLE_COST_FACTOR),
        }),
      stopped: before?.stopped ?? false,
    };
    seen.set(sandbox.ref, entry);
    if (bytes >= opts.limitBytes && !entry.stopped) {
      entry.stopped = true;
      // Listed again at the next look: a paused sandbox is left alone until it runs again.
      listedAt = 0;
      try {
        await opts.onOver(sandbox, bytes);
      } catch (err) {
        entry.stopped = false;
        throw err;
      }
    }
  };

  const tick = async () => {
    const now = Date.now();
    if (now - listedAt >= listEveryMs) {
      live = await opts.driver.list(opts.labels);
      listedAt = now;
      const refs = new Set(live.map((s) => s.ref));
      for (const ref of seen.keys()) if (!refs.has(ref)) seen.delete(ref);
      // Not running now: if it runs again (resumed), it is judged anew, and stopped again when over.
      for (const s of live) {
        const entry = seen.get(s.ref);
        if (entry && s.state !== "running") entry.stopped = false;
      }
    }
    for (const sandbox of live) {
      const entry = seen.get(sandbox.ref);
      if (sandbox.state !== "running") continue;
      if (entry && entry.due > now) continue;
      try {
        await sample(sandbox, now);
      } catch (err) {
        opts.onError?.(err);
      }
    }
  };

  const watching = startPeriodicTask("disk watch", tick, {
    firstAfterMs: minMs,
    everyMs: minMs,
    onLapse: (err) => opts.onError?.(err),
  });
  return { tick: watching.tickNow, stop: watching.stop };
};
