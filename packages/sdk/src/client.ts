import type {
  ApiKeyRecord,
  AppConversation,
  CreatedApiKey,
  Event,
  EventFilter,
  EventSearch,
  Page,
  StartRequest,
  StartTask,
} from "./types.ts";

/** A failure the API answered: its stable `code`, the HTTP `status` and a message fit for a user. */
export class TernApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  constructor(status: number, code: string, message: string, details?: unknown) {
    super(message);
    this.name = "TernApiError";
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export interface ClientOptions {
  baseUrl: string;
  /** An API key (sent as Authorization: Bearer). */
  apiKey?: string;
  /** Or a conversation's session_api_key: reads that conversation and its events only. */
  sessionApiKey?: string;
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | string[] | undefined>;

const queryString = (q: Query): string => {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined) continue;
    for (const item of Array.isArray(v) ? v : [v]) params.append(k, String(item));
  }
  const s = params.toString();
  return s ? `?${s}` : "";
};

export const createClient = (opts: ClientOptions) => {
  const base = opts.baseUrl.replace(/\/$/, "");
  const doFetch = opts.fetch ?? fetch;

  const request = async <T>(method: string, path: string, init: { query?: Query; body?: unknown } = {}): Promise<T> => {
    const headers: Record<string, string> = { accept: "application/json" };
    if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
    else if (opts.sessionApiKey) headers["x-session-api-key"] = opts.sessionApiKey;
    if (init.body !== undefined) headers["content-type"] = "application/json";
    const res = await doFetch(`${base}${path}${queryString(init.query ?? {})}`, {
      method,
      headers,
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      // Not JSON: reported below with the status.
    }
    if (!res.ok) {
      const error = (json as { error?: { code?: string; message?: string; details?: unknown } } | null)?.error;
      throw new TernApiError(
        res.status,
        error?.code ?? "http_error",
        error?.message ?? `HTTP ${res.status}`,
        error?.details,
      );
    }
    return json as T;
  };

  const events = {
    search: (conversationId: string, q: EventSearch = {}) =>
      request<Page<Event>>("GET", `/api/v1/conversation/${conversationId}/events/search`, { query: { ...q } }),
    count: (conversationId: string, filter: EventFilter = {}) =>
      request<number>("GET", `/api/v1/conversation/${conversationId}/events/count`, { query: { ...filter } }),
    /** Every matching event, following next_page_id to the end. */
    async *all(conversationId: string, q: Omit<EventSearch, "page_id"> = {}): AsyncGenerator<Event> {
      let pageId: string | undefined;
      do {
        const page = await events.search(conversationId, { ...q, page_id: pageId });
        yield* page.items;
        pageId = page.next_page_id ?? undefined;
      } while (pageId);
    },
  };

  const startTasks = {
    /** In the order asked; null where unknown or not the caller's. At most 100 ids. */
    get: (ids: string[]) =>
      request<(StartTask | null)[]>("GET", "/api/v1/app-conversations/start-tasks", { query: { ids } }),
    search: (q: { limit?: number; page_id?: string } = {}) =>
      request<Page<StartTask>>("GET", "/api/v1/app-conversations/start-tasks/search", { query: q }),
  };

  const conversations = {
    /** Starts a conversation; returns its start task (follow it until READY). */
    start: (body: StartRequest) => request<StartTask>("POST", "/api/v1/app-conversations", { body }),
    /** In the order asked; null where unknown or not the caller's. At most 100 ids. */
    get: (ids: string[]) => request<(AppConversation | null)[]>("GET", "/api/v1/app-conversations", { query: { ids } }),
    search: (q: { limit?: number; page_id?: string } = {}) =>
      request<Page<AppConversation>>("GET", "/api/v1/app-conversations/search", { query: q }),
    /**
     * Starts a conversation and polls its start task until READY (resolves to the task) or ERROR
     * (throws with the task's detail).
     */
    async startAndWait(body: StartRequest, wait: { timeoutMs?: number; intervalMs?: number } = {}): Promise<StartTask> {
      const task = await conversations.start(body);
      const deadline = Date.now() + (wait.timeoutMs ?? 300_000);
      for (;;) {
        const [current] = await startTasks.get([task.id]);
        if (!current) throw new TernApiError(404, "not_found", `start task ${task.id} disappeared`);
        if (current.status === "READY") return current;
        if (current.status === "ERROR") {
          throw new TernApiError(200, "start_failed", current.detail ?? "the conversation failed to start", current);
        }
        if (Date.now() > deadline)
          throw new TernApiError(0, "timeout", `start task ${task.id} is still ${current.status}`);
        await new Promise((r) => setTimeout(r, wait.intervalMs ?? 1_000));
      }
    },
  };

  const keys = {
    create: (body: { name?: string; expires_at?: string } = {}) =>
      request<CreatedApiKey>("POST", "/api/keys", { body }),
    list: () => request<ApiKeyRecord[]>("GET", "/api/keys"),
    revoke: (id: string) => request<{ id: string; revoked: true }>("DELETE", `/api/keys/${id}`),
  };

  return { keys, conversations, startTasks, events };
};

export type TernClient = ReturnType<typeof createClient>;
