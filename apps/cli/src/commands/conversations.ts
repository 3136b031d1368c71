import { parseArgs } from "node:util";
import { failedExecutionStatuses } from "@tern/core";
import type { Event, StartTask, TernClient } from "@tern/sdk";
import { TernApiError } from "@tern/sdk";

/**
 * The client commands: they talk to the API (TERN_API_URL, TERN_API_KEY) through the SDK, as any
 * user's tool would, never to the database.
 *
 *   cli conversations start --repo owner/repo [--branch B] "message"   prints the start task's id
 *   cli conversations watch ID        stages, then events, until the agent stops (0 finished, 1 error)
 *   cli conversations list [--limit N]
 *   cli conversations approve ID      runs the tool calls that wait for confirmation
 *   cli conversations reject ID [--reason TEXT]   rejects them; the agent reads the reason
 *   cli events ID [--kind K] [--json]
 *   cli diff ID
 */
export interface ClientCommandDeps {
  client: TernClient;
  out: (line: string) => void;
  err: (line: string) => void;
}

const FAILED = new Set<string>(failedExecutionStatuses);

const textOf = (content: unknown): string =>
  Array.isArray(content)
    ? content
        .map((c) => (c && typeof c === "object" && "text" in c ? String((c as { text: unknown }).text) : ""))
        .join(" ")
    : "";

const oneLine = (s: string, max = 200) => {
  const flat = s.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

/** One line per event, for a terminal. */
const describeEvent = (e: Event): string => {
  const ev = e as Record<string, unknown> & { kind: string; source?: string; timestamp?: string };
  const at = (ev.timestamp ?? "").slice(11, 19);
  const head = `${at} ${ev.source ?? ""}`.trim();
  switch (ev.kind) {
    case "MessageEvent":
      return `${head} 💬 ${oneLine(textOf((ev.llm_message as { content?: unknown })?.content))}`;
    case "ActionEvent": {
      const a = (ev.action ?? {}) as Record<string, unknown>;
      if (ev.tool_name === "terminal") return `${head} $ ${oneLine(String(a.command ?? ""))}`;
      if (ev.tool_name === "file_editor") return `${head} ✎ ${a.command ?? "edit"} ${a.path ?? ""}`;
      if (ev.tool_name === "finish") return `${head} ✔ ${oneLine(String(a.message ?? ""))}`;
      return `${head} → ${ev.tool_name}`;
    }
    case "ObservationEvent": {
      const o = (ev.observation ?? {}) as Record<string, unknown>;
      const exit = o.kind === "TerminalObservation" ? ` (exit ${o.exit_code})` : "";
      return `${head}   ${oneLine(textOf(o.content), 300)}${exit}`;
    }
    case "UserRejectObservation":
      return `${head}   ✖ rejected ${ev.tool_name}: ${oneLine(String(ev.rejection_reason ?? ""))}`;
    case "AgentErrorEvent":
      return `${head} ✖ ${oneLine(String(ev.error ?? ""))}`;
    case "ConversationStateUpdateEvent":
      return `${head} · ${ev.key} = ${typeof ev.value === "string" ? ev.value : JSON.stringify(ev.value)}`;
    default:
      return `${head} ${ev.kind}`;
  }
};

const executionStatusOf = (e: Event): string | null => {
  const ev = e as { kind: string; key?: unknown; value?: unknown };
  return ev.kind === "ConversationStateUpdateEvent" && ev.key === "execution_status" && typeof ev.value === "string"
    ? ev.value
    : null;
};

const start = async (deps: ClientCommandDeps, argv: string[]): Promise<number> => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { repo: { type: "string" }, branch: { type: "string" }, title: { type: "string" } },
    allowPositionals: true,
    strict: true,
  });
  const message = positionals.join(" ").trim();
  const task = await deps.client.conversations.start({
    ...(values.repo ? { selected_repository: values.repo } : {}),
    ...(values.branch ? { selected_branch: values.branch } : {}),
    ...(values.title ? { title: values.title } : {}),
    ...(message ? { initial_message: { role: "user", content: [{ type: "text", text: message }] } } : {}),
  } as Parameters<TernClient["conversations"]["start"]>[0]);
  deps.out(task.id);
  return 0;
};

/** Follows a start task's stages; the conversation's id at READY, null at ERROR. */
const followStart = async (deps: ClientCommandDeps, task: StartTask): Promise<string | null> => {
  for await (const t of deps.client.startTasks.stream(task.id)) {
    // The detail says why it failed, or what it waits for ("waiting for a worker").
    deps.err(`[start] ${t.status}${t.detail ? `: ${t.detail}` : ""}`);
    if (t.status === "READY") return t.app_conversation_id ?? null;
    if (t.status === "ERROR") return null;
  }
  return null;
};

const watch = async (deps: ClientCommandDeps, argv: string[]): Promise<number> => {
  const id = argv[0];
  if (!id) throw new UsageError("usage: cli conversations watch ID");
  // A start task's id: its stages first. A conversation's id: straight to its events.
  let conversationId = id;
  const [task] = await deps.client.startTasks.get([id]).catch(() => [null]);
  if (task) {
    const ready = await followStart(deps, task);
    if (!ready) return 1;
    conversationId = ready;
  }
  const [conversation] = await deps.client.conversations.get([conversationId]);
  if (!conversation) throw new TernApiError(404, "not_found", "No such conversation");
  deps.err(`[watch] ${conversation.conversation_url}`);
  // The history comes first: a status in it is only final if nothing follows it.
  const stored = await deps.client.events.count(conversationId);
  let seen = 0;
  let status: string | null = null;
  const verdict = () => (status === "finished" ? 0 : status && FAILED.has(status) ? 1 : null);
  if (stored === 0 && verdict() !== null) return verdict() as number;
  for await (const { event } of deps.client.streamEvents(conversationId)) {
    seen++;
    deps.out(describeEvent(event));
    status = executionStatusOf(event) ?? status;
    // Not an end: the agent goes on once someone answers (from here, another terminal or the page).
    if (seen >= stored && executionStatusOf(event) === "waiting_for_confirmation") {
      deps.err(`[watch] tool calls wait for confirmation: cli conversations approve|reject ${conversationId}`);
    }
    if (seen >= stored && verdict() !== null) {
      deps.err(`[watch] the agent stopped: ${status}`);
      return verdict() as number;
    }
  }
  return 1;
};

const list = async (deps: ClientCommandDeps, argv: string[]): Promise<number> => {
  const { values } = parseArgs({ args: argv, options: { limit: { type: "string", default: "20" } }, strict: true });
  const page = await deps.client.conversations.search({ limit: Number(values.limit) });
  for (const c of page.items) {
    deps.out([c.id, c.execution_status ?? "-", c.sandbox_status ?? "-", c.updated_at, c.title ?? ""].join("\t"));
  }
  return 0;
};

/** approve / reject: the answer to the tool calls that wait for confirmation (409 when none wait). */
const answer = async (deps: ClientCommandDeps, argv: string[], accept: boolean): Promise<number> => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: accept ? {} : { reason: { type: "string" } },
    allowPositionals: true,
    strict: true,
  });
  const id = positionals[0];
  if (!id || positionals.length > 1) {
    throw new UsageError(
      accept ? "usage: cli conversations approve ID" : "usage: cli conversations reject ID [--reason TEXT]",
    );
  }
  const reason = (values as { reason?: string }).reason;
  await deps.client.events.respondToConfirmation(id, { accept, ...(reason ? { reason } : {}) });
  deps.err(
    accept ? "[confirm] approved: the pending tool calls run" : "[confirm] rejected: the agent goes on without them",
  );
  return 0;
};

export const conversationsCommand = async (deps: ClientCommandDeps, argv: string[]): Promise<number> => {
  const [verb, ...rest] = argv;
  switch (verb) {
    case "start":
      return start(deps, rest);
    case "watch":
      return watch(deps, rest);
    case "list":
      return list(deps, rest);
    case "approve":
      return answer(deps, rest, true);
    case "reject":
      return answer(deps, rest, false);
    default:
      throw new UsageError(
        'usage: cli conversations <start --repo owner/repo "message" | watch ID | list | approve ID | reject ID [--reason TEXT]>',
      );
  }
};

export const eventsCommand = async (deps: ClientCommandDeps, argv: string[]): Promise<number> => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { kind: { type: "string" }, json: { type: "boolean", default: false } },
    allowPositionals: true,
    strict: true,
  });
  const id = positionals[0];
  if (!id) throw new UsageError("usage: cli events ID [--kind KIND] [--json]");
  const q = values.kind
    ? { kind__eq: values.kind as NonNullable<Parameters<TernClient["events"]["count"]>[1]>["kind__eq"] }
    : {};
  for await (const e of deps.client.events.all(id, q)) deps.out(values.json ? JSON.stringify(e) : describeEvent(e));
  return 0;
};

export const diffCommand = async (deps: ClientCommandDeps, argv: string[]): Promise<number> => {
  const id = argv[0];
  if (!id) throw new UsageError("usage: cli diff ID");
  const text = await deps.client.conversations.diff(id);
  if (text) deps.out(text.replace(/\n$/, ""));
  return 0;
};

/** Wrong arguments: exit 64 with the usage. */
export class UsageError extends Error {}
