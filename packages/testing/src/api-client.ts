import { waitFor } from "./wait-for.ts";

/** A conversation as the API answers it; a test names the fields it reads beyond these. */
export interface ConversationView {
  id: string;
  execution_status: string;
  sandbox_id: string;
  sandbox_status: string;
  session_api_key: string;
  [field: string]: unknown;
}

export interface StartTaskView {
  id: string;
  status: string;
  detail: string | null;
  app_conversation_id: string | null;
  [field: string]: unknown;
}

export interface EventView {
  id: string;
  kind: string;
  source: string;
  key?: string;
  value?: unknown;
  [field: string]: unknown;
}

/** A user's calls to the API over HTTP, as its tests make them. */
export interface ApiClient {
  key: string;
  /** The same client with another user's key. */
  as: (key: string) => ApiClient;
  /** fetch with this client's key (or `key`) as a Bearer token; `json` is sent as the body. */
  call: (path: string, init?: RequestInit & { key?: string; json?: unknown }) => Promise<Response>;
  /** The response's JSON, once its status is `status` (default 200); else an error with both. */
  json: <T>(res: Response | Promise<Response>, status?: number) => Promise<T>;
  /** GET /api/v1/app-conversations?ids=: one conversation, which must be there. */
  conversation: <T = ConversationView>(id: string) => Promise<T>;
  /** Every event of a conversation, following next_page_id, `limit` at a time (default 100). */
  events: <T = EventView>(id: string, limit?: number) => Promise<T[]>;
  /** Polls a start task until READY (an ERROR fails at once); returns its conversation's id. */
  waitForStart: (taskId: string, timeoutMs?: number) => Promise<string>;
  /** POST /api/v1/app-conversations, then its start task until READY (an ERROR fails at once). */
  start: <T = StartTaskView>(body: unknown, timeoutMs?: number) => Promise<{ id: string; task: T }>;
  /** Polls the conversation until its execution_status is one of `statuses`; returns it. */
  waitForExecution: <T = ConversationView>(id: string, statuses: string[], timeoutMs?: number) => Promise<T>;
  /**
   * Waits until `remaining()` (the scripted replies the run has still to use) is 0 and the run
   * that used them has ended (the last event is a state update other than running).
   */
  settle: <T = ConversationView>(id: string, remaining: () => number, timeoutMs?: number) => Promise<T>;
}

export const apiClient = (opts: {
  url: string;
  key: string;
  /** Appended to a wait's failure: what the processes behind the API said last. */
  detail?: () => string;
}): ApiClient => {
  const { url, key } = opts;
  const detail = opts.detail ?? (() => "");
  const client: ApiClient = {
    key,
    as: (other) => apiClient({ ...opts, key: other }),
    call: (path, init = {}) => {
      const { key: as, json, headers, ...rest } = init;
      const h = new Headers(headers);
      if (as ?? key) h.set("authorization", `Bearer ${as ?? key}`);
      if (json !== undefined) h.set("content-type", "application/json");
      return fetch(`${url}${path}`, {
        ...rest,
        headers: h,
        body: json !== undefined ? JSON.stringify(json) : rest.body,
      });
    },
    json: async <T>(res: Response | Promise<Response>, status = 200) => {
      const r = await res;
      const text = await r.text();
      if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${text}`);
      return JSON.parse(text) as T;
    },
    conversation: async <T>(id: string) => {
      const [c] = await client.json<(T | null)[]>(client.call(`/api/v1/app-conversations?ids=${id}`));
      if (!c) throw new Error(`conversation ${id} not found`);
      return c;
    },
    events: async <T>(id: string, limit = 100) => {
      const items: T[] = [];
      let page: string | null = null;
      do {
        const res: { items: T[]; next_page_id: string | null } = await client.json(
          client.call(`/api/v1/conversation/${id}/events/search?limit=${limit}${page ? `&page_id=${page}` : ""}`),
        );
        items.push(...res.items);
        page = res.next_page_id;
      } while (page);
      return items;
    },
    waitForStart: (taskId, timeoutMs = 90_000) =>
      waitFor(
        async () => {
          const [t] = await client.json<(StartTaskView | null)[]>(
            client.call(`/api/v1/app-conversations/start-tasks?ids=${taskId}`),
          );
          if (t?.status === "ERROR") throw new Error(`start failed: ${t.detail}`);
          return t?.status === "READY" && (t.app_conversation_id ?? "");
        },
        { what: `start task ${taskId} to be READY`, timeoutMs, detail },
      ),
    start: async <T>(body: unknown, timeoutMs?: number) => {
      const task = await client.json<T & { id: string }>(
        client.call("/api/v1/app-conversations", { method: "POST", json: body }),
      );
      return { id: await client.waitForStart(task.id, timeoutMs), task };
    },
    waitForExecution: async <T>(id: string, statuses: string[], timeoutMs = 45_000) => {
      let last = "";
      await waitFor(
        async () => {
          last = (await client.conversation(id)).execution_status;
          return statuses.includes(last);
        },
        {
          what: `execution_status ${statuses.join(" or ")}`,
          timeoutMs,
          detail: () => `it stayed ${last}\n${detail()}`,
        },
      );
      return client.conversation<T>(id);
    },
    settle: async <T>(id: string, remaining: () => number, timeoutMs = 45_000) => {
      await waitFor(
        async () => {
          if (remaining() > 0) return false;
          const last = (await client.events(id)).at(-1);
          return last?.kind === "ConversationStateUpdateEvent" && last.value !== "running";
        },
        { what: "the run to settle", timeoutMs, detail },
      );
      return client.conversation<T>(id);
    },
  };
  return client;
};
