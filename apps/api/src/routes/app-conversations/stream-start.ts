import { createRoute, z } from "@hono/zod-openapi";
import {
  isTerminalStartTaskStatus,
  type StartTask,
  startRequestSchema,
  startTaskRecordSchema,
  startTaskStatuses,
} from "@tern/core";
import { startConversation, startTaskNow } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses, notFoundResponse, toStartTaskRecord } from "../records.ts";
import type { Router } from "../router.ts";

/** How often the stream looks at the task on a process without the change feed: stages last longer than this. */
const POLL_MS = 100;
/** With the change feed, the task is read when a stage commits; this look is only the backstop. */
const FEED_BACKSTOP_MS = 1_000;

const route = createRoute({
  method: "post",
  path: "/api/v1/app-conversations/stream-start",
  tags: ["Conversations"],
  summary: "Start a conversation and stream its start task, one snapshot per stage, until READY or ERROR",
  description:
    "The body is POST /api/v1/app-conversations'. The answer is one JSON array written as it grows " +
    "(OpenHands' format: `[`, snapshots separated by `,\\n`, `]`): the WORKING task first, then a " +
    "snapshot per stage the task entered, the last one READY or ERROR. Errors before the task exists " +
    "are ordinary error answers.",
  request: { body: { required: true, content: { "application/json": { schema: startRequestSchema } } } },
  responses: {
    200: {
      description: "The task's snapshots, streamed",
      content: { "application/json": { schema: z.array(startTaskRecordSchema) } },
    },
    ...errorResponses,
    ...notFoundResponse,
    409: errorResponse("conversation_id is taken"),
    413: errorResponse("The initial message is longer than MAX_MESSAGE_BYTES"),
    503: errorResponse("The job queue is unreachable; nothing was written"),
  },
});

/** The snapshots between two reads: the stages the task went through meanwhile (stage_durations names them). */
const snapshotsSince = (last: StartTask, now: StartTask): StartTask[] => {
  if (now.status === last.status) return [];
  const from = startTaskStatuses.indexOf(last.status);
  const to = startTaskStatuses.indexOf(now.status);
  const passed =
    now.status === "ERROR"
      ? []
      : startTaskStatuses.slice(from + 1, to).filter((s) => now.stageDurations[s] !== undefined);
  return [...passed.map((status) => ({ ...now, status, appConversationId: null })), now];
};

/**
 * Resolves `next()` when the task may have changed: with the process's change feed, as soon as a stage
 * of it commits (a missed notification is caught by the backstop); without one, every POLL_MS.
 * The subscription is made before the first read, so no stage begins unseen between the two.
 */
const taskChanges = (deps: ApiDeps, taskId: string) => {
  const hub = deps.streams && !deps.streams.closing ? deps.streams : null;
  let changed = false;
  let wake: (() => void) | null = null;
  const unsubscribe = hub?.feed.onStartTask(taskId, () => {
    changed = true;
    wake?.();
  });
  return {
    next: () =>
      new Promise<void>((resolve) => {
        if (changed) {
          changed = false;
          return resolve();
        }
        const done = () => {
          clearTimeout(timer);
          wake = null;
          changed = false;
          resolve();
        };
        const timer = setTimeout(done, hub ? FEED_BACKSTOP_MS : POLL_MS);
        wake = done;
      }),
    /** Stops following: a pending `next()` resolves at once. */
    close: () => {
      unsubscribe?.();
      wake?.();
    },
  };
};

export const registerStreamStart = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const task = await startConversation(deps, c.get("principal").userId, c.req.valid("json"));
    const encoder = new TextEncoder();
    let cancelled = false;
    const changes = isTerminalStartTaskStatus(task.status) ? null : taskChanges(deps, task.id);
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        const write = (t: StartTask, first = false) =>
          controller.enqueue(
            encoder.encode(`${first ? "[" : ",\n"}${JSON.stringify(toStartTaskRecord(t, deps.config))}`),
          );
        write(task, true);
        let last = task;
        try {
          // The first read follows the subscription at once: a stage begun before it is seen.
          for (let first = true; changes && !cancelled && !isTerminalStartTaskStatus(last.status); first = false) {
            if (!first) await changes.next();
            if (cancelled) break;
            const now = await startTaskNow(deps, task.id);
            if (!now) break;
            for (const snapshot of snapshotsSince(last, now)) write(snapshot);
            last = now;
          }
        } catch (err) {
          deps.logger.warn({ err, task_id: task.id }, "stream-start stopped reading its task");
        } finally {
          changes?.close();
        }
        if (cancelled) return;
        controller.enqueue(encoder.encode("]"));
        controller.close();
      },
      cancel() {
        cancelled = true;
        changes?.close();
      },
    });
    // A streamed body, so not c.json(); the document still describes it as the array it adds up to.
    return new Response(body, {
      status: 200,
      headers: { "content-type": "application/json", "cache-control": "no-cache" },
    }) as never;
  });
