import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { createChangeFeed } from "@tern/db";
import { createApp } from "../src/app.ts";
import { createStreamHub, type StreamHub } from "../src/routes/streams/event-pump.ts";
import { createSocketServer } from "../src/routes/streams/socket-frames.ts";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * The test API with live streams: its own change feed (a LISTEN connection) and stream hub, served
 * on a port of its own. `restart` replaces the process's part (server, feed, hub) as a new API
 * process would, on the same database: what a client resumes across.
 */
export interface StreamTestApi {
  api: TestApi;
  url: () => string;
  hub: () => StreamHub;
  call: (path: string, init?: RequestInit & { key?: string }) => Promise<Response>;
  restart: () => Promise<void>;
  close: () => Promise<void>;
}

export const startStreamTestApi = async (env: Record<string, string> = {}): Promise<StreamTestApi> => {
  const api = await startTestApi({ env });
  let current: { url: string; hub: StreamHub; stop: () => Promise<void> } | null = null;

  const boot = async () => {
    const feed = createChangeFeed(api.database.url);
    await feed.ready;
    const hub = createStreamHub(api.database.db, feed);
    const app = createApp({ ...api.deps, streams: hub });
    const server = serve({
      fetch: app.fetch,
      port: 0,
      hostname: "127.0.0.1",
      websocket: { server: createSocketServer() },
    });
    await new Promise<void>((resolve) => server.once("listening", () => resolve()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    current = {
      url,
      hub,
      stop: async () => {
        hub.closeAll();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        });
        await feed.close();
      },
    };
  };
  await boot();
  const now = () => {
    if (!current) throw new Error("stopped");
    return current;
  };
  return {
    api,
    url: () => now().url,
    hub: () => now().hub,
    call: (path, init = {}) => {
      const { key, headers, ...rest } = init;
      const h = new Headers(headers);
      if (key) h.set("authorization", `Bearer ${key}`);
      return fetch(`${now().url}${path}`, { ...rest, headers: h });
    },
    restart: async () => {
      await now().stop();
      current = null;
      await boot();
    },
    close: async () => {
      await current?.stop();
      await api.close();
    },
  };
};

interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** A parsed SSE response, read in the background as frames arrive. */
export interface SseClient {
  status: number;
  frames: SseFrame[];
  /** The events (frames with data and no event name), parsed. */
  events: () => { id: string; data: Record<string, unknown> }[];
  ended: Promise<void>;
  close: () => void;
}

export const openSse = async (url: string, headers: Record<string, string> = {}): Promise<SseClient> => {
  const ac = new AbortController();
  const res = await fetch(url, { headers, signal: ac.signal });
  const frames: SseFrame[] = [];
  const client: SseClient = {
    status: res.status,
    frames,
    events: () =>
      frames
        .filter((f) => f.data !== undefined && f.event === undefined && f.id !== undefined)
        .map((f) => ({ id: f.id as string, data: JSON.parse(f.data as string) as Record<string, unknown> })),
    ended: Promise.resolve(),
    close: () => ac.abort(),
  };
  if (!res.ok || !res.body) return client;
  const body = res.body;
  client.ended = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        for (let cut = buffer.indexOf("\n\n"); cut >= 0; cut = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const frame: SseFrame = {};
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) frame.comment = line.slice(1).trim();
            const m = /^(id|event|data): ?(.*)$/.exec(line);
            if (m) frame[m[1] as "id" | "event" | "data"] = m[2];
          }
          frames.push(frame);
        }
      }
    } catch {
      // aborted by close(), or cut by the server
    }
  })();
  return client;
};
