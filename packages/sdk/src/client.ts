import createFetchClient from "openapi-fetch";
import type { paths } from "./openapi.ts";
import { readSseFrames, type StreamRetry, sleep } from "./stream.ts";
import type {
  ApiKeyRecord,
  AppConversation,
  AppConversationPage,
  AppConversationUpdateRequest,
  AppSendMessageRequest,
  AppSendMessageResponse,
  ConversationFilter,
  ConversationSearch,
  CreateApiKeyRequest,
  CreatedApiKey,
  CreatedUser,
  CreateSecretRequest,
  CreateUserRequest,
  Event,
  EventFilter,
  EventPage,
  EventSearch,
  GetHooksResponse,
  GetSkillsResponse,
  PageQuery,
  PendingMessageRequest,
  PendingMessageResponse,
  RevokedApiKey,
  SandboxInfo,
  SandboxPage,
  SandboxSpecInfo,
  SandboxSpecInfoPage,
  Secret,
  SecretList,
  SendMessageRequest,
  Settings,
  SettingsRequest,
  StartRequest,
  StartTask,
  StartTaskFilter,
  StartTaskPage,
  StartTaskSearch,
  UpdateSecretRequest,
  UserInfo,
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

/** The API's error body, or whatever else a proxy in between answered. */
const apiErrorOf = (status: number, body: unknown): TernApiError => {
  const error =
    typeof body === "object" && body !== null && "error" in body
      ? (body.error as { code?: unknown; message?: unknown; details?: unknown })
      : undefined;
  return new TernApiError(
    status,
    typeof error?.code === "string" ? error.code : "http_error",
    typeof error?.message === "string" ? error.message : `HTTP ${status}`,
    error?.details,
  );
};

/** The answer's data, or the API's error as a TernApiError. */
const unwrap = async <D>(pending: Promise<{ data?: D; error?: unknown; response: Response }>): Promise<D> => {
  const { data, error, response } = await pending;
  if (!response.ok || error !== undefined) throw apiErrorOf(response.status, error);
  if (data === undefined) throw new TernApiError(response.status, "http_error", "The API answered with no body");
  return data;
};

/** What `streamEvents` yields: the event, and its stream id (resume after it with `after`). */
export interface StreamedEvent {
  id: string;
  event: Event;
}

export interface EventStreamOptions extends StreamRetry {
  kind__eq?: EventFilter["kind__eq"];
  timestamp__gte?: string;
  /** Start after this stream id (what a previous stream yielded last). */
  after?: string;
}

/** Whether a failed answer is worth trying again (a passing fault) rather than final. */
const isPassing = (status: number) => status === 429 || status >= 500;

export const createClient = (opts: ClientOptions) => {
  const headers: Record<string, string> = { accept: "application/json" };
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
  else if (opts.sessionApiKey) headers["x-session-api-key"] = opts.sessionApiKey;
  // Paths, parameters and bodies are checked against the generated `paths`; `?ids=` repeats per id.
  const api = createFetchClient<paths>({
    baseUrl: opts.baseUrl,
    headers,
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
  });

  const doFetch = opts.fetch ?? fetch;
  const base = opts.baseUrl.replace(/\/$/, "");
  /** A streamed GET: the response when OK, the API's error otherwise. */
  const openStream = async (path: string, extra: Record<string, string>, signal?: AbortSignal) => {
    const res = await doFetch(`${base}${path}`, {
      headers: { ...headers, accept: "text/event-stream", ...extra },
      ...(signal ? { signal } : {}),
    });
    if (!res.ok || !res.body) throw apiErrorOf(res.status, await res.json().catch(() => null));
    return res.body;
  };

  /**
   * The conversation's events, stored ones first, then live, for as long as the caller iterates.
   * It resumes by itself: after a cut (network, API restart, a slow-client disconnect, the server's
   * shutdown) it reconnects with Last-Event-ID, so every event comes exactly once, in order.
   * Stops when `signal` aborts or the caller breaks out; a final error (401, 404, 400) is thrown.
   */
  async function* streamEvents(conversationId: string, o: EventStreamOptions = {}): AsyncGenerator<StreamedEvent> {
    let last = o.after;
    let wait = o.retryMs ?? 1_000;
    const query = new URLSearchParams();
    if (o.kind__eq) query.set("kind__eq", o.kind__eq);
    if (o.timestamp__gte) query.set("timestamp__gte", o.timestamp__gte);
    const path = `/api/v1/conversation/${encodeURIComponent(conversationId)}/events/stream${query.size ? `?${query}` : ""}`;
    while (!o.signal?.aborted) {
      try {
        const body = await openStream(path, last ? { "last-event-id": last } : {}, o.signal);
        wait = o.retryMs ?? 1_000;
        for await (const frame of readSseFrames(body)) {
          if (frame.event || frame.id === undefined) continue; // shutdown notice: reconnect below
          last = frame.id;
          yield { id: frame.id, event: JSON.parse(frame.data) as Event };
        }
      } catch (err) {
        if (o.signal?.aborted) return;
        if (err instanceof TernApiError && !isPassing(err.status)) throw err;
      }
      await sleep(wait, o.signal);
      wait = Math.min(wait * 2, 10_000);
    }
  }

  const events = {
    stream: streamEvents,
    search: (conversationId: string, q: EventSearch = {}): Promise<EventPage> =>
      unwrap(
        api.GET("/api/v1/conversation/{conversation_id}/events/search", {
          params: { path: { conversation_id: conversationId }, query: q },
        }),
      ),
    count: (conversationId: string, filter: EventFilter = {}): Promise<number> =>
      unwrap(
        api.GET("/api/v1/conversation/{conversation_id}/events/count", {
          params: { path: { conversation_id: conversationId }, query: filter },
        }),
      ),
    /** The agent server's route: appends a user message; `run` defaults to false here. */
    send: (conversationId: string, body: SendMessageRequest): Promise<{ success: boolean }> =>
      unwrap(
        api.POST("/api/v1/conversation/{conversation_id}/events", {
          params: { path: { conversation_id: conversationId } },
          body,
        }),
      ),
    /** Pauses the agent between two steps. */
    pause: (conversationId: string): Promise<{ success: boolean }> =>
      unwrap(
        api.POST("/api/v1/conversation/{conversation_id}/pause", {
          params: { path: { conversation_id: conversationId } },
        }),
      ),
    /**
     * Confirmation mode: accepts (the pending calls run) or rejects (each gets a UserRejectObservation
     * with `reason`) the tool calls that wait; 409 when nothing waits (already answered).
     */
    respondToConfirmation: (
      conversationId: string,
      body: { accept: boolean; reason?: string },
    ): Promise<{ success: boolean }> =>
      unwrap(
        api.POST("/api/v1/conversation/{conversation_id}/events/respond_to_confirmation", {
          params: { path: { conversation_id: conversationId } },
          body: body as { accept: boolean; reason: string },
        }),
      ),
    /** Runs the agent on what is stored (409 while a run is going on). */
    run: (conversationId: string): Promise<{ success: boolean }> =>
      unwrap(
        api.POST("/api/v1/conversation/{conversation_id}/run", {
          params: { path: { conversation_id: conversationId } },
        }),
      ),
    /** By id, in the order asked; null where the conversation has no such event. At most 100 ids. */
    get: (conversationId: string, ids: string[]): Promise<(Event | null)[]> =>
      unwrap(
        api.GET("/api/v1/conversation/{conversation_id}/events", {
          params: { path: { conversation_id: conversationId }, query: { id: ids } },
        }),
      ),
    /** Every matching event, following next_page_id to the end. */
    async *all(conversationId: string, q: Omit<EventSearch, "page_id"> = {}): AsyncGenerator<Event> {
      let pageId: string | undefined;
      do {
        const page = await events.search(conversationId, { ...q, ...(pageId ? { page_id: pageId } : {}) });
        yield* page.items;
        pageId = page.next_page_id ?? undefined;
      } while (pageId);
    },
  };

  const startTasks = {
    /** Each stage of the task as it begins (from its current one), ending after READY or ERROR. */
    async *stream(id: string, o: StreamRetry = {}): AsyncGenerator<StartTask> {
      let wait = o.retryMs ?? 1_000;
      while (!o.signal?.aborted) {
        try {
          const body = await openStream(
            `/api/v1/app-conversations/start-tasks/${encodeURIComponent(id)}/stream`,
            {},
            o.signal,
          );
          for await (const frame of readSseFrames(body)) {
            if (frame.event) continue;
            const task = JSON.parse(frame.data) as StartTask;
            yield task;
            if (task.status === "READY" || task.status === "ERROR") return;
          }
        } catch (err) {
          if (o.signal?.aborted) return;
          if (err instanceof TernApiError && !isPassing(err.status)) throw err;
        }
        await sleep(wait, o.signal);
        wait = Math.min(wait * 2, 10_000);
      }
    },
    /** In the order asked; null where unknown or not the caller's. At most 100 ids. */
    get: (ids: string[]): Promise<(StartTask | null)[]> =>
      unwrap(api.GET("/api/v1/app-conversations/start-tasks", { params: { query: { ids } } })),
    search: (q: StartTaskSearch = {}): Promise<StartTaskPage> =>
      unwrap(api.GET("/api/v1/app-conversations/start-tasks/search", { params: { query: q } })),
    count: (filter: StartTaskFilter = {}): Promise<number> =>
      unwrap(api.GET("/api/v1/app-conversations/start-tasks/count", { params: { query: filter } })),
  };

  const conversations = {
    /** Starts a conversation; returns its start task (follow it until READY). */
    start: (body: StartRequest): Promise<StartTask> => unwrap(api.POST("/api/v1/app-conversations", { body })),
    /** In the order asked; null where unknown or not the caller's. At most 100 ids. */
    get: (ids: string[]): Promise<(AppConversation | null)[]> =>
      unwrap(api.GET("/api/v1/app-conversations", { params: { query: { ids } } })),
    search: (q: ConversationSearch = {}): Promise<AppConversationPage> =>
      unwrap(api.GET("/api/v1/app-conversations/search", { params: { query: q } })),
    count: (filter: ConversationFilter = {}): Promise<number> =>
      unwrap(api.GET("/api/v1/app-conversations/count", { params: { query: filter } })),
    /** Removes the conversation's sandbox; its record and events stay. */
    delete: (id: string): Promise<{ success: boolean }> =>
      unwrap(api.DELETE("/api/v1/app-conversations/{conversation_id}", { params: { path: { conversation_id: id } } })),
    /** Changes only the fields given. */
    update: (id: string, body: AppConversationUpdateRequest): Promise<AppConversation> =>
      unwrap(
        api.PATCH("/api/v1/app-conversations/{conversation_id}", { params: { path: { conversation_id: id } }, body }),
      ),
    /** OpenHands' send-message: `run` defaults to true. 409 while the sandbox is paused, 410 once removed. */
    sendMessage: (id: string, body: AppSendMessageRequest): Promise<AppSendMessageResponse> =>
      unwrap(
        api.POST("/api/v1/app-conversations/{conversation_id}/send-message", {
          params: { path: { conversation_id: id } },
          body,
        }),
      ),
    /**
     * Starts a conversation and reads the streamed start task: every snapshot, WORKING to READY or
     * ERROR, once the stream ended.
     */
    streamStart: (body: StartRequest): Promise<StartTask[]> =>
      unwrap(api.POST("/api/v1/app-conversations/stream-start", { body })),
    /**
     * Queues a message for `task-{start task id}` (delivered in order at READY; 429 beyond 10), or
     * sends it at once to a conversation id.
     */
    queueMessage: (conversationOrTaskId: string, body: PendingMessageRequest): Promise<PendingMessageResponse> =>
      unwrap(
        api.POST("/api/v1/conversations/{conversation_id}/pending-messages", {
          params: { path: { conversation_id: conversationOrTaskId } },
          body,
        }),
      ),
    /**
     * A file's text from the conversation's sandbox (absolute, or relative to its workspace
     * directory; "" when it names no file). 403 outside the workspace, 409 while paused, 410 once removed.
     */
    readFile: (id: string, filePath?: string): Promise<string> =>
      unwrap(
        api.GET("/api/v1/app-conversations/{conversation_id}/file", {
          params: { path: { conversation_id: id }, query: filePath === undefined ? {} : { file_path: filePath } },
        }),
      ),
    skills: (id: string): Promise<GetSkillsResponse> =>
      unwrap(
        api.GET("/api/v1/app-conversations/{conversation_id}/skills", { params: { path: { conversation_id: id } } }),
      ),
    hooks: (id: string): Promise<GetHooksResponse> =>
      unwrap(
        api.GET("/api/v1/app-conversations/{conversation_id}/hooks", { params: { path: { conversation_id: id } } }),
      ),
    /** The trajectory zip: `meta.json` and `event_{i:06d}_{id}.json` per event. */
    download: async (id: string): Promise<Uint8Array> =>
      new Uint8Array(
        (await unwrap(
          api.GET("/api/v1/app-conversations/{conversation_id}/download", {
            params: { path: { conversation_id: id } },
            parseAs: "arrayBuffer",
          }),
        )) as ArrayBuffer,
      ),
    /** `git diff` of the workspace since the start: the unified diff as text. */
    diff: async (id: string): Promise<string> => {
      const res = await doFetch(`${base}/api/v1/app-conversations/${encodeURIComponent(id)}/diff`, { headers });
      if (!res.ok) throw apiErrorOf(res.status, await res.json().catch(() => null));
      return res.text();
    },
    /** The diff, one entry per file. */
    diffFiles: (id: string) =>
      unwrap(
        api.GET("/api/v1/app-conversations/{conversation_id}/diff", {
          params: { path: { conversation_id: id }, query: { format: "json" } },
        }),
      ),
    /** The workspace as a .tar.gz, streamed (write the body to a file as it comes). */
    workspaceArchive: async (id: string): Promise<ReadableStream<Uint8Array>> => {
      const res = await doFetch(`${base}/api/v1/app-conversations/${encodeURIComponent(id)}/workspace.tar.gz`, {
        headers,
      });
      if (!res.ok || !res.body) throw apiErrorOf(res.status, await res.json().catch(() => null));
      return res.body;
    },
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
    create: (body: CreateApiKeyRequest = {}): Promise<CreatedApiKey> => unwrap(api.POST("/api/keys", { body })),
    list: (): Promise<ApiKeyRecord[]> => unwrap(api.GET("/api/keys")),
    revoke: (id: string): Promise<RevokedApiKey> => unwrap(api.DELETE("/api/keys/{id}", { params: { path: { id } } })),
  };

  const sandboxes = {
    search: (q: PageQuery = {}): Promise<SandboxPage> =>
      unwrap(api.GET("/api/v1/sandboxes/search", { params: { query: q } })),
    /** In the order asked; null where unknown or not the caller's. At most 100 ids. */
    get: (ids: string[]): Promise<(SandboxInfo | null)[]> =>
      unwrap(api.GET("/api/v1/sandboxes", { params: { query: { id: ids } } })),
    /** Freezes the sandbox; its agent run waits until `resume`. Resolves once paused. */
    pause: (id: string): Promise<{ success: boolean }> =>
      unwrap(api.POST("/api/v1/sandboxes/{id}/pause", { params: { path: { id } } })),
    /** Thaws it; the run that waited continues. Resolves once running. */
    resume: (id: string): Promise<{ success: boolean }> =>
      unwrap(api.POST("/api/v1/sandboxes/{id}/resume", { params: { path: { id } } })),
    /** Removes it; its conversation's record and events stay. Resolves once removed. */
    remove: (id: string): Promise<{ success: boolean }> =>
      unwrap(api.DELETE("/api/v1/sandboxes/{id}", { params: { path: { id } } })),
  };

  const sandboxSpecs = {
    search: (q: PageQuery = {}): Promise<SandboxSpecInfoPage> =>
      unwrap(api.GET("/api/v1/sandbox-specs/search", { params: { query: q } })),
    /** By image, in the order asked; null where this deployment offers none. */
    get: (ids: string[]): Promise<(SandboxSpecInfo | null)[]> =>
      unwrap(api.GET("/api/v1/sandbox-specs", { params: { query: { id: ids } } })),
  };

  const users = {
    me: (): Promise<UserInfo> => unwrap(api.GET("/api/v1/users/me")),
    /** Admin keys only: a new user and its first key, shown once. */
    create: (body: CreateUserRequest = { is_admin: false }): Promise<CreatedUser> =>
      unwrap(api.POST("/api/v1/users", { body })),
  };

  /** Write-only values: they go in, and never come back out. */
  const secrets = {
    list: (): Promise<SecretList> => unwrap(api.GET("/api/v1/secrets")),
    create: (body: CreateSecretRequest): Promise<Secret> => unwrap(api.POST("/api/v1/secrets", { body })),
    update: (name: string, body: UpdateSecretRequest): Promise<Secret> =>
      unwrap(api.PUT("/api/v1/secrets/{name}", { params: { path: { name } }, body })),
    remove: (name: string): Promise<{ name: string; deleted: true }> =>
      unwrap(api.DELETE("/api/v1/secrets/{name}", { params: { path: { name } } })),
  };

  const settings = {
    get: (): Promise<Settings> => unwrap(api.GET("/api/v1/settings")),
    /** Fields absent are kept; null clears one. */
    update: (body: SettingsRequest): Promise<Settings> => unwrap(api.POST("/api/v1/settings", { body })),
  };

  return { keys, conversations, startTasks, events, sandboxes, sandboxSpecs, streamEvents, users, secrets, settings };
};

export type TernClient = ReturnType<typeof createClient>;
