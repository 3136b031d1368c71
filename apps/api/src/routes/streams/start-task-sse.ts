import { createRoute, z } from "@hono/zod-openapi";
import {
  isTerminalStartTaskStatus,
  NotFoundError,
  type StartTask,
  type StartTaskStatus,
  startTaskStatuses,
  UnavailableError,
} from "@tern/core";
import { ownedStartTasks, startTaskNow } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, notFoundResponse, toStartTaskRecord } from "../records.ts";
import type { Router } from "../router.ts";
import { sseHeaders } from "./events-sse.ts";
import { cutConnection, openSseChannel, sseFrame } from "./sse-channel.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/start-tasks/{task_id}/stream",
  tags: ["Start tasks"],
  summary: "Follow a start task (Server-Sent Events)",
  description:
    "One frame per stage as it begins (its `id` is the status, its `data` the start task with that status), " +
    "from the task's current stage on; the stream closes after READY or ERROR.",
  request: { params: z.object({ task_id: z.string().openapi({ description: "The start task, 32 hex or uuid" }) }) },
  responses: {
    200: { description: "A stream of stages", content: { "text/event-stream": { schema: z.string() } } },
    ...errorResponses,
    ...notFoundResponse,
  },
});

const order = (s: string) => startTaskStatuses.indexOf(s as StartTaskStatus);

export const registerStartTaskStream = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const [owned] = await ownedStartTasks(deps, c.get("principal").userId, [c.req.valid("param").task_id]);
    if (!owned) throw new NotFoundError("No such start task");
    // Ownership first: another user's id is 404 whether or not this process streams.
    const hub = deps.streams;
    if (!hub || hub.closing) throw new UnavailableError("Event streams are not available on this process");
    const taskId = owned.id;
    let unsubscribe = () => undefined as unknown;
    const channel = openSseChannel(deps.config, hub, {
      onPull: () => undefined,
      onEnd: () => unsubscribe(),
      cut: cutConnection(c.env),
    });
    let last = -1;
    const emit = (task: StartTask, status: string) => {
      if (order(status) <= last) return;
      last = order(status);
      channel.send(sseFrame({ id: status, data: { ...toStartTaskRecord(task, deps.config), status } }));
      if (isTerminalStartTaskStatus(status as StartTaskStatus)) channel.close();
    };
    // Reads in the order notifications came, so stages are sent in the order they began.
    let chain: Promise<void> = Promise.resolve();
    const follow = (status: string | null) => {
      chain = chain
        .then(async () => {
          const task = await startTaskNow(deps, taskId);
          if (!task) return channel.close();
          // A notified stage is sent as that stage, never the read's later one: the stages between
          // have their own notifications queued behind this one, and a terminal frame closes the
          // stream. The read's own status is for the first read and after a reconnection (null).
          emit(task, status ?? task.status);
        })
        .catch((err) => {
          deps.logger.warn({ err, task_id: taskId }, "start task stream read failed");
          channel.abort();
        });
    };
    // Subscribed before the first read, so no stage begins unseen between the two.
    unsubscribe = hub.feed.onStartTask(taskId, follow);
    follow(null);
    return new Response(channel.body, { status: 200, headers: sseHeaders });
  });
