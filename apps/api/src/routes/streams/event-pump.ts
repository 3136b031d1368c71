import type { StoredEvent } from "@tern/core";
import {
  type ChangeFeed,
  type EventFilter,
  type EventPage,
  type EventPosition,
  type EventReadDeps,
  eventsAfter,
} from "@tern/services";

/** Events read per catch-up query. */
const PAGE_SIZE = 100;

/**
 * What every live stream of one API process shares: the change feed (one LISTEN connection) and
 * the catch-up reads. Streams at the same place of the same conversation with the same filter
 * (the common case: every watcher of a conversation, live) share one query per wake, so a
 * notification costs one read per conversation, not one per client.
 */
export interface StreamHub {
  feed: ChangeFeed;
  readAfter(filter: EventFilter, after: EventPosition | null): Promise<EventPage>;
  /** Registers a stream's closing step for shutdown; returns its removal. */
  track(close: () => void): () => void;
  /** Ends every stream (shutdown): each closes cleanly, its clients resume elsewhere from their last id. */
  closeAll(): void;
  readonly closing: boolean;
  /** Streams open on this process. */
  readonly openStreams: number;
}

export const createStreamHub = (db: EventReadDeps["db"], feed: ChangeFeed): StreamHub => {
  const inFlight = new Map<string, Promise<EventPage>>();
  const open = new Set<() => void>();
  let closing = false;
  return {
    feed,
    readAfter(filter, after) {
      const key = JSON.stringify([filter, after]);
      let read = inFlight.get(key);
      if (!read) {
        read = eventsAfter(db, filter, after, PAGE_SIZE).finally(() => inFlight.delete(key));
        inFlight.set(key, read);
      }
      return read;
    },
    track(close) {
      open.add(close);
      return () => open.delete(close);
    },
    closeAll() {
      closing = true;
      for (const close of [...open]) close();
    },
    get closing() {
      return closing;
    },
    get openStreams() {
      return open.size;
    },
  };
};

export interface EventSink {
  /** Hands one event on; the transport queues it. */
  write(event: StoredEvent, position: EventPosition): void;
  /** Whether the transport's bounded buffer has room for more now. */
  hasRoom(): boolean;
  /** The client stayed behind for `slowClientMs` while events waited: disconnect it (it resumes from its last id). */
  onSlowClient(): void;
  /** A read failed: end the stream (the client resumes from its last id). */
  onError(err: unknown): void;
}

/**
 * Moves a conversation's events to one client, in (timestamp, seq) order, each exactly once:
 * every stored event after `after`, then each new one as the change feed wakes it. It reads only
 * while the client's buffer has room (and the rest of a page is read again later), so a client
 * slower than the stream is never buffered without bound; one that stays behind is disconnected.
 */
export const createEventPump = (
  hub: StreamHub,
  filter: EventFilter,
  after: EventPosition | null,
  sink: EventSink,
  opts: { slowClientMs: number },
) => {
  let cursor = after;
  let pending = true;
  let running = false;
  let stopped = false;
  let slowTimer: NodeJS.Timeout | undefined;

  const run = async (): Promise<void> => {
    if (running || stopped) return;
    running = true;
    try {
      while (pending && !stopped) {
        if (!sink.hasRoom()) {
          slowTimer ??= setTimeout(() => {
            if (!stopped) sink.onSlowClient();
          }, opts.slowClientMs);
          return;
        }
        if (slowTimer) {
          clearTimeout(slowTimer);
          slowTimer = undefined;
        }
        pending = false;
        const page = await hub.readAfter(filter, cursor);
        if (stopped) return;
        for (const [i, event] of page.events.entries()) {
          if (!sink.hasRoom() && i > 0) {
            pending = true; // the rest is read again once the client caught up
            break;
          }
          cursor = { timestamp: event.timestamp, seq: event.seq };
          sink.write(event, cursor);
        }
        if (page.hasMore) pending = true;
      }
    } catch (err) {
      if (!stopped) sink.onError(err);
    } finally {
      running = false;
    }
    // Woken while the last read was in flight: go again.
    if (pending && !stopped && sink.hasRoom()) void run();
  };

  const unsubscribe = hub.feed.onEvents(filter.conversationId, () => {
    pending = true;
    void run();
  });

  return {
    /** Starts (the stored events), and again whenever the client's buffer drained. */
    pull: () => void run(),
    /** Moves the start before the first pull (a socket that wants only new events starts after the latest). */
    seek(position: EventPosition | null) {
      cursor = position;
    },
    position: () => cursor,
    stop() {
      stopped = true;
      if (slowTimer) clearTimeout(slowTimer);
      unsubscribe();
    },
  };
};
