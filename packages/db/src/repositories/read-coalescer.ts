import { turnPump } from "./turn-pump.ts";

/** One caller's read: the rows it asked for, of which it gets only its owner's. */
interface Waiter<T> {
  owner: string;
  keys: readonly string[];
  resolve: (rows: T[]) => void;
  reject: (err: unknown) => void;
}

interface ReadCoalescerStats {
  /** Statements issued, and the reads they answered. */
  batches: number;
  reads: number;
}

export interface ReadCoalescer<T> {
  /** The rows of `keys` (each once, in the order first asked) that belong to `owner`; the others are left out. */
  read(owner: string, keys: readonly string[]): Promise<T[]>;
  readonly stats: ReadCoalescerStats;
}

export interface ReadCoalescerOptions<T> {
  /** One statement: the rows of these keys (distinct), whoever owns them. */
  load: (keys: string[]) => Promise<T[]>;
  keyOf: (row: T) => string;
  ownerOf: (row: T) => string;
  /** Distinct keys per statement at most; a read that would pass it waits for the next (default 1,000). */
  maxKeys?: number;
  /** Statements running at once (default 1). */
  maxInFlight?: number;
}

const MAX_KEYS = 1_000;

/**
 * Read coalescing, the group commit of reads: the reads that arrive while a statement is in flight
 * are gathered into the next one, issued as soon as it returns (an idle coalescer issues at the end
 * of the current turn of the event loop, with whatever arrived in it: no timer). One statement
 * loads the rows of all their keys, each key once, whoever asked for it; each caller then gets
 * only the rows whose owner is its own. So a Postgres round trip is paid per batch, not per read.
 *
 * What a read sees is what it saw alone: it never joins a statement already sent, so the statement
 * that answers it starts after it was asked, and sees every commit made before that (a
 * just-written row, a delete). A statement that fails answers each of its callers with its error.
 */
export const createReadCoalescer = <T>(opts: ReadCoalescerOptions<T>): ReadCoalescer<T> => {
  const maxKeys = opts.maxKeys ?? MAX_KEYS;
  const maxInFlight = opts.maxInFlight ?? 1;
  const stats: ReadCoalescerStats = { batches: 0, reads: 0 };
  let queue: Waiter<T>[] = [];

  /** The waiters at the head of the queue whose keys fit one statement (the first always does). */
  const takeBatch = (): { batch: Waiter<T>[]; keys: string[] } => {
    const keys = new Set<string>();
    let n = 0;
    for (; n < queue.length; n++) {
      const w = queue[n] as Waiter<T>;
      const added = w.keys.filter((k) => !keys.has(k));
      if (n > 0 && keys.size + added.length > maxKeys) break;
      for (const k of added) keys.add(k);
    }
    const batch = queue.slice(0, n);
    queue = queue.slice(n);
    return { batch, keys: [...keys] };
  };

  const answer = (batch: Waiter<T>[], rows: T[]) => {
    const byKey = new Map<string, T>();
    for (const r of rows) byKey.set(opts.keyOf(r), r);
    for (const w of batch) {
      const own: T[] = [];
      const seen = new Set<string>();
      for (const k of w.keys) {
        const row = byKey.get(k);
        // The owner filter: the statement loaded every caller's keys, whoever owns them.
        if (row === undefined || seen.has(k) || opts.ownerOf(row) !== w.owner) continue;
        seen.add(k);
        own.push(row);
      }
      w.resolve(own);
    }
  };

  const run = async (batch: Waiter<T>[], keys: string[]) => {
    stats.batches++;
    stats.reads += batch.length;
    try {
      answer(batch, await opts.load(keys));
    } catch (err) {
      for (const w of batch) w.reject(err);
    }
  };

  const { schedule } = turnPump({
    maxInFlight,
    waiting: () => queue.length,
    take: takeBatch,
    run: ({ batch, keys }) => run(batch, keys),
  });

  return {
    stats,
    read(owner, keys) {
      if (keys.length === 0) return Promise.resolve([]);
      return new Promise<T[]>((resolve, reject) => {
        queue.push({ owner, keys, resolve, reject });
        schedule();
      });
    },
  };
};
