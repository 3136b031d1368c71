import pg from "pg";

/**
 * One Postgres connection per process that LISTENs for the change notifications the triggers of
 * migration 0080 send after commit, and fans them out to the process's subscribers (each live
 * stream). Subscribers re-read from Postgres when woken (a catch-up query after their own cursor),
 * so a notification carries no data that could be lost or reordered: it only says "look again".
 * While the connection is down nothing is delivered; once it is back every subscriber is woken,
 * so whatever committed in between is read then.
 */
export interface ChangeFeed {
  /** `wake` runs after every commit that appended events to the conversation. Returns the unsubscribe. */
  onEvents(conversationId: string, wake: () => void): () => void;
  /**
   * `onStatus` runs with each status the task enters, in commit order; with null after a
   * reconnection (statuses may have been missed: read the task again).
   */
  onStartTask(taskId: string, onStatus: (status: string | null) => void): () => void;
  /** Resolves once the first LISTEN is in effect. */
  readonly ready: Promise<void>;
  close(): Promise<void>;
}

const EVENTS_CHANNEL = "tern_events";
const START_TASKS_CHANNEL = "tern_start_tasks";
const RECONNECT_MS = 1_000;

type Subscribers<T> = Map<string, Set<T>>;

const subscribe = <T>(map: Subscribers<T>, key: string, fn: T): (() => void) => {
  let set = map.get(key);
  if (!set) {
    set = new Set();
    map.set(key, set);
  }
  set.add(fn);
  return () => {
    const s = map.get(key);
    if (!s) return;
    s.delete(fn);
    if (s.size === 0) map.delete(key);
  };
};

export const createChangeFeed = (
  connectionString: string,
  opts: { onError?: (err: Error) => void; reconnectMs?: number } = {},
): ChangeFeed => {
  const events: Subscribers<() => void> = new Map();
  const tasks: Subscribers<(status: string | null) => void> = new Map();
  let client: pg.Client | null = null;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });

  const deliver = (msg: pg.Notification) => {
    const payload = msg.payload ?? "";
    if (msg.channel === EVENTS_CHANNEL) {
      for (const wake of events.get(payload) ?? []) wake();
    } else if (msg.channel === START_TASKS_CHANNEL) {
      const cut = payload.indexOf(":");
      const taskId = payload.slice(0, cut);
      for (const fn of tasks.get(taskId) ?? []) fn(payload.slice(cut + 1));
    }
  };

  const wakeEveryone = () => {
    for (const set of events.values()) for (const wake of set) wake();
    for (const set of tasks.values()) for (const fn of set) fn(null);
  };

  const connect = async (reconnecting: boolean): Promise<void> => {
    if (closed) return;
    const c = new pg.Client({ connectionString, keepAlive: true });
    const retry = (err: Error) => {
      opts.onError?.(err);
      c.removeAllListeners();
      c.on("error", () => undefined);
      c.end().catch(() => undefined);
      if (client === c) client = null;
      if (!closed && !timer) {
        timer = setTimeout(() => {
          timer = undefined;
          void connect(true);
        }, opts.reconnectMs ?? RECONNECT_MS);
      }
    };
    c.on("error", retry);
    c.on("end", () => retry(new Error("change feed connection ended")));
    c.on("notification", deliver);
    try {
      await c.connect();
      await c.query(`listen ${EVENTS_CHANNEL}; listen ${START_TASKS_CHANNEL}`);
    } catch (err) {
      retry(err as Error);
      return;
    }
    if (closed) {
      await c.end().catch(() => undefined);
      return;
    }
    client = c;
    markReady();
    if (reconnecting) wakeEveryone();
  };
  void connect(false);

  return {
    onEvents: (conversationId, wake) => subscribe(events, conversationId, wake),
    onStartTask: (taskId, onStatus) => subscribe(tasks, taskId, onStatus),
    ready,
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      const c = client;
      client = null;
      if (c) {
        c.removeAllListeners();
        c.on("error", () => undefined);
        await c.end().catch(() => undefined);
      }
    },
  };
};
